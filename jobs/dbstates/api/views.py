"""The sqlrs engine API (``/sqlrs/v1/...``, ``docs/sqlrs-engine.openapi.yaml``).

Thin views: each handler declares its request with ``accepts`` (its query string and body
serializers), calls one service or selector, and answers the sqlrs entry. Every error, whatever
the method, is sqlrs's ErrorResponse. That OpenAPI file is this API's contract, so the views
stay out of the project's own schema.
"""

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.dbstates import cache, config, deletion_tree, selectors, services
from jobs.dbstates.api import serializers as s
from jobs.dbstates.api.errors import sqlrs_exception_handler
from jobs.dbstates.api.streams import events_response, run_response
from jobs.dbstates.engine import runs
from jobs.dbstates.engine.identity import engine_health
from jobs.dbstates.models import Instance, PrepareJob, State
from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.rendering import JSONAnswer, json_text
from pipeline_project.db.snapshot import snapshot
from pipeline_project.web.ndjson import NDJSON


class EngineView(DeclaredRequestMixin, APIView):
    """A route of the engine: sqlrs's error shape."""

    permission_model = PrepareJob

    def get_exception_handler(self):
        return sqlrs_exception_handler


def _absolute(request, route: str, **kwargs) -> str:
    """A route's absolute URL, so that a client joining it to engine.json's endpoint (sqlrs's
    CLI takes an absolute URL as it is) or to the request's URL reaches the same route."""
    return request.build_absolute_uri(reverse(route, kwargs=kwargs))


def _entries(request, rows, shape) -> HttpResponse:
    """A list (from one snapshot) as a JSON array, or NDJSON (one entry per line) when the client accepts it."""
    with snapshot():
        entries = [shape(row) for row in rows]
    if NDJSON in request.headers.get("Accept", ""):
        return HttpResponse("".join(json_text(entry) + "\n" for entry in entries), content_type=NDJSON)
    return JSONAnswer(entries)


def _deleted(result: deletion_tree.DeleteResult) -> Response:
    return Response(result.as_dict(), status=409 if result.outcome == "blocked" and not result.dry_run else 200)


@extend_schema(exclude=True)
class HealthView(EngineView):
    """No authentication: a CLI checks that the engine is up before it reads engine.json's token."""

    authentication_classes = ()
    permission_classes = (AllowAny,)

    @accepts()
    def get(self, request):
        return Response(engine_health())


@extend_schema(exclude=True)
class ConfigView(EngineView):
    @accepts(query=s.ConfigQuery)
    def get(self, request, *, query):
        path = query.get("path")
        value = config.config_get(path=path, effective=query["effective"])
        return Response({"path": path, "value": value} if path else value)

    @accepts(body=s.ConfigSetSerializer)
    def patch(self, request, *, body):
        return Response(config.config_set(path=body["path"], value=body["value"]))

    @accepts(query=s.ConfigRemoveQuery)
    def delete(self, request, *, query):
        return Response(config.config_remove(path=query["path"], effective=query["effective"]))


@extend_schema(exclude=True)
class ConfigSchemaView(EngineView):
    @accepts()
    def get(self, request):
        return Response(config.SCHEMA)


@extend_schema(exclude=True)
class CacheStatusView(EngineView):
    permission_model = State

    @accepts()
    def get(self, request):
        return Response(cache.cache_status())


@extend_schema(exclude=True)
class CacheExplainView(EngineView):
    permission_model = State
    post_permission = "view"

    @accepts(body=s.PrepareRequestSerializer)
    def post(self, request, *, body):
        return Response(cache.prepare_explain(request=s.prepare_request(body)))


@extend_schema(exclude=True)
class PrepareJobsView(EngineView):
    @accepts(query=s.JobsQuery)
    def get(self, request, *, query):
        return _entries(request, selectors.prepare_jobs_list(job=query.get("job")), selectors.prepare_job_entry)

    @accepts(body=s.PrepareJobSerializer)
    def post(self, request, *, body):
        job = services.prepare_job_submit(request=s.prepare_request(body))
        status_url = _absolute(request, "sqlrs-prepare-job", job_id=job.job_id)
        accepted = {
            "job_id": job.job_id,
            "status_url": status_url,
            "events_url": _absolute(request, "sqlrs-prepare-job-events", job_id=job.job_id),
            "status": job.status,
        }
        return Response(accepted, status=201, headers={"Location": status_url})


@extend_schema(exclude=True)
class PrepareJobView(EngineView):
    @accepts()
    def get(self, request, job_id):
        return Response(selectors.prepare_job_status_get(job_id=job_id))

    @accepts(query=s.DeleteQuery)
    def delete(self, request, job_id, *, query):
        return _deleted(services.prepare_job_delete(job_id=job_id, force=query["force"], dry_run=query["dry_run"]))


@extend_schema(exclude=True)
class PrepareJobCancelView(EngineView):
    post_permission = "change"

    @accepts()
    def post(self, request, job_id):
        was_active = services.prepare_job_cancel(job_id=job_id)
        return Response(selectors.prepare_job_status_get(job_id=job_id), status=202 if was_active else 200)


@extend_schema(exclude=True)
class PrepareJobEventsView(EngineView):
    @accepts()
    def get(self, request, job_id):
        status, event_count = selectors.prepare_job_progress_get(job_id=job_id)  # a 404 before the stream starts
        return events_response(
            job_id, status=status, event_count=event_count, range_header=request.headers.get("Range")
        )


@extend_schema(exclude=True)
class TasksView(EngineView):
    @accepts(query=s.TasksQuery)
    def get(self, request, *, query):
        return _entries(request, selectors.tasks_list(job=query.get("job")), selectors.task_entry)


@extend_schema(exclude=True)
class InstancesView(EngineView):
    permission_model = Instance

    @accepts(query=s.InstancesQuery)
    def get(self, request, *, query):
        rows = selectors.instances_list(
            id_prefix=query.get("id_prefix"), state=query.get("state"), image=query.get("image")
        )
        return _entries(request, rows, selectors.instance_entry)


@extend_schema(exclude=True)
class InstanceView(EngineView):
    permission_model = Instance

    @accepts()
    def get(self, request, ref):
        entry, by_name = selectors.instance_lookup(ref=ref)
        if by_name:
            location = _absolute(request, "sqlrs-instance", ref=entry["instance_id"])
            return HttpResponse(status=307, headers={"Location": location})
        return Response(entry)

    @accepts(query=s.DeleteQuery)
    def delete(self, request, ref, *, query):
        instance, _by_name = selectors.instance_resolve(ref=ref)
        result = services.instance_delete(
            instance_id=instance.instance_id, force=query["force"], dry_run=query["dry_run"]
        )
        return _deleted(result)


@extend_schema(exclude=True)
class NamesView(EngineView):
    permission_model = Instance

    @accepts(query=s.NamesQuery)
    def get(self, request, *, query):
        rows = selectors.names_list(instance=query.get("instance"), state=query.get("state"), image=query.get("image"))
        return _entries(request, rows, selectors.name_entry)


@extend_schema(exclude=True)
class NameView(EngineView):
    permission_model = Instance

    @accepts()
    def get(self, request, name):
        return Response(selectors.name_entry(selectors.name_get(name=name)))


@extend_schema(exclude=True)
class RunsView(EngineView):
    permission_model = Instance
    post_permission = "change"

    @accepts(body=s.RunRequestSerializer)
    def post(self, request, *, body):
        plan = runs.run_prepare(
            instance_ref=body["instance_ref"],
            kind=body["kind"],
            command=body.get("command"),
            args=body.get("args"),
            stdin=body.get("stdin"),
            steps=s.run_steps(body),
        )
        return run_response(plan)


@extend_schema(exclude=True)
class StatesView(EngineView):
    permission_model = State

    @accepts(query=s.StatesQuery)
    def get(self, request, *, query):
        rows = selectors.states_list(id_prefix=query.get("id_prefix"), kind=query.get("kind"), image=query.get("image"))
        return _entries(request, rows, selectors.state_entry)


@extend_schema(exclude=True)
class StateView(EngineView):
    permission_model = State

    @accepts()
    def get(self, request, state_id):
        return Response(selectors.state_entry(selectors.state_get(state_id=state_id)))

    @accepts(query=s.StateDeleteQuery)
    def delete(self, request, state_id, *, query):
        result = services.state_delete(
            state_id=state_id, recurse=query["recurse"], force=query["force"], dry_run=query["dry_run"]
        )
        return _deleted(result)
