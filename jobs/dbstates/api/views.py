"""The sqlrs engine API (``/sqlrs/v1/...``, ``../shared/refs/sqlrs-engine.openapi.yaml``).

Thin views: check the request's shape, call one service or selector, answer the sqlrs entry.
That OpenAPI file is this API's contract, so the views stay out of the project's own schema.
"""

import json

from django.http import HttpResponse, JsonResponse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.dbstates import cache, config, deletion, runs, selectors, services
from jobs.dbstates.api.errors import sqlrs_exception_handler
from jobs.dbstates.api.streams import NDJSON, events_response, run_response
from jobs.dbstates.engine import engine_health
from jobs.dbstates.models import Instance, PrepareJob, State
from pipeline_project.core.errors import InvalidInputError

PREPARE_FIELDS = {"prepare_kind", "image_id", "psql_args", "stdin", "plan_only", "source_manifest"}
PREPARE_FIELDS |= {"liquibase_args", "liquibase_exec", "liquibase_exec_mode", "liquibase_env", "work_dir"}
RUN_FIELDS = {"instance_ref", "kind", "command", "args", "stdin", "steps"}
TRUE, FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}


def health(request):
    """No authentication: a CLI checks that the engine is up before it reads engine.json's token."""
    if request.method not in ("GET", "HEAD"):
        return JsonResponse({"code": "method_not_allowed", "message": "use GET"}, status=405, headers={"Allow": "GET"})
    return JsonResponse(engine_health())


def _flag(request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None:
        return False
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise InvalidInputError(f"{name} must be true or false", code="invalid_argument")


def _body(request, fields: set[str]) -> dict:
    body = request.data
    if not isinstance(body, dict):
        raise InvalidInputError("the request body must be a JSON object", code="invalid_argument")
    if unknown := sorted(set(body) - fields):
        raise InvalidInputError(f"unknown fields: {', '.join(unknown)}", code="invalid_argument")
    if "source_manifest" in body:
        raise InvalidInputError("source_manifest is for remote engines; give absolute paths", code="invalid_argument")
    return body


def _entries(request, rows, shape) -> HttpResponse:
    """A list as a JSON array, or NDJSON (one entry per line) when the client accepts it."""
    entries = [shape(row) for row in rows]
    if NDJSON in request.headers.get("Accept", ""):
        return HttpResponse("".join(json.dumps(entry) + "\n" for entry in entries), content_type=NDJSON)
    return JsonResponse(entries, safe=False)


def _deleted(result: deletion.DeleteResult) -> Response:
    return Response(result.as_dict(), status=409 if result.outcome == "blocked" and not result.dry_run else 200)


class EngineView(APIView):
    permission_model = PrepareJob

    def get_exception_handler(self):
        return sqlrs_exception_handler


class EntriesView(EngineView):
    """A list: the selector's rows, filtered by the query parameters it names, as entries."""

    filters: tuple[str, ...] = ()
    rows = entry = None  # staticmethods: a selector's list and its entry shape

    def get(self, request):
        rows = self.rows(**{name: request.query_params.get(name) for name in self.filters})
        return _entries(request, rows, self.entry)


@extend_schema(exclude=True)
class ConfigView(EngineView):
    post_permission = "change"

    def get(self, request):
        path = request.query_params.get("path")
        value = config.config_get(path=path, effective=_flag(request, "effective"))
        return Response({"path": path, "value": value} if path else value)

    def patch(self, request):
        body = _body(request, {"path", "value"})
        if not isinstance(body.get("path"), str) or "value" not in body:
            raise InvalidInputError("path (a string) and value are required", code="invalid_argument")
        return Response(config.config_set(path=body["path"], value=body["value"]))

    def delete(self, request):
        path = request.query_params.get("path")
        if not path:
            raise InvalidInputError("path is required", code="invalid_argument")
        return Response(config.config_remove(path=path, effective=_flag(request, "effective")))


@extend_schema(exclude=True)
class ConfigSchemaView(EngineView):
    def get(self, request):
        return Response(config.SCHEMA)


@extend_schema(exclude=True)
class CacheStatusView(EngineView):
    permission_model = State

    def get(self, request):
        return Response(cache.cache_status())


@extend_schema(exclude=True)
class CacheExplainView(EngineView):
    permission_model = State
    post_permission = "view"

    def post(self, request):
        body = _body(request, PREPARE_FIELDS - {"plan_only"})
        return Response(cache.prepare_explain(**body))


@extend_schema(exclude=True)
class PrepareJobsView(EntriesView):
    filters, rows, entry = ("job",), staticmethod(selectors.jobs_list), staticmethod(selectors.job_entry)

    def post(self, request):
        job = services.prepare_job_submit(**_body(request, PREPARE_FIELDS))
        status_url = f"/sqlrs/v1/prepare-jobs/{job.job_id}"
        accepted = {
            "job_id": job.job_id,
            "status_url": status_url,
            "events_url": f"{status_url}/events",
            "status": job.status,
        }
        return Response(accepted, status=201, headers={"Location": status_url})


@extend_schema(exclude=True)
class PrepareJobView(EngineView):
    def get(self, request, job_id):
        return Response(selectors.job_status(selectors.job_get(job_id=job_id)))

    def delete(self, request, job_id):
        return _deleted(
            deletion.prepare_job_delete(job_id=job_id, force=_flag(request, "force"), dry_run=_flag(request, "dry_run"))
        )


@extend_schema(exclude=True)
class PrepareJobCancelView(EngineView):
    post_permission = "change"

    def post(self, request, job_id):
        job, was_active = services.prepare_job_cancel(job_id=job_id)
        return Response(selectors.job_status(job), status=202 if was_active else 200)


@extend_schema(exclude=True)
class PrepareJobEventsView(EngineView):
    def get(self, request, job_id):
        job = selectors.job_get(job_id=job_id)  # 404 before the stream starts
        return events_response(job, range_header=request.headers.get("Range"))


@extend_schema(exclude=True)
class TasksView(EntriesView):
    filters, rows, entry = ("job",), staticmethod(selectors.tasks_list), staticmethod(selectors.task_entry)


@extend_schema(exclude=True)
class InstancesView(EntriesView):
    permission_model = Instance
    filters = ("id_prefix", "state", "image")
    rows, entry = staticmethod(selectors.instances_list), staticmethod(selectors.instance_entry)


@extend_schema(exclude=True)
class InstanceView(EngineView):
    permission_model = Instance

    def get(self, request, ref):
        instance, by_name = selectors.instance_resolve(ref=ref)
        if by_name:
            return HttpResponse(status=307, headers={"Location": f"/sqlrs/v1/instances/{instance.instance_id}"})
        return Response(selectors.instance_entry(instance))

    def delete(self, request, ref):
        instance, _by_name = selectors.instance_resolve(ref=ref)
        return _deleted(
            deletion.instance_delete(
                instance_id=instance.instance_id, force=_flag(request, "force"), dry_run=_flag(request, "dry_run")
            )
        )


@extend_schema(exclude=True)
class NamesView(EntriesView):
    permission_model = Instance
    filters = ("instance", "state", "image")
    rows, entry = staticmethod(selectors.names_list), staticmethod(selectors.name_entry)


@extend_schema(exclude=True)
class NameView(EngineView):
    permission_model = Instance

    def get(self, request, name):
        return Response(selectors.name_entry(selectors.name_get(name=name)))


@extend_schema(exclude=True)
class RunsView(EngineView):
    permission_model = Instance
    post_permission = "change"

    def post(self, request):
        plan = runs.run_prepare(**_body(request, RUN_FIELDS))
        return run_response(plan)


@extend_schema(exclude=True)
class StatesView(EntriesView):
    permission_model = State
    filters = ("id_prefix", "kind", "image")
    rows, entry = staticmethod(selectors.states_list), staticmethod(selectors.state_entry)


@extend_schema(exclude=True)
class StateView(EngineView):
    permission_model = State

    def get(self, request, state_id):
        return Response(selectors.state_entry(selectors.state_get(state_id=state_id)))

    def delete(self, request, state_id):
        result = deletion.state_delete(
            state_id=state_id,
            recurse=_flag(request, "recurse"),
            force=_flag(request, "force"),
            dry_run=_flag(request, "dry_run"),
        )
        return _deleted(result)
