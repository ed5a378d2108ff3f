"""``/api/v1/processes/{namespace}/{process_id}/...``: thin views over the processes' services.

init, call, repair, get and put are async views (adrf): their synchronous steps (the request's
checks, validating it as the handler declares, putting the task in the schedule) run in one
hop to the web worker's pool of threads, then the request waits for the task's end on the event
loop (a NOTIFY through the process's notification hub, listened to before the task exists),
holding no thread and no database connection while the processor runs.
"""

from inspect import iscoroutinefunction

from adrf.views import APIView
from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from jobs.processes import selectors, services, waiting
from jobs.processes.api import serializers as s
from jobs.processes.models import Process, process_audit_id
from jobs.processes.types import PreparedTask
from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.schema import error_responses
from pipeline_project.audit.services import audited_call
from pipeline_project.db.connections import returning_connections


class ProcessApiView(DeclaredRequestMixin, APIView):
    """An async handler runs its synchronous steps through ``in_thread``; the first also runs the
    request's checks (``initial``: token, permissions, throttles, then the request validated as
    the handler declares it, in ``self.accepted``) before its step, in the same hop, so a handler
    must call it before anything else."""

    permission_model = Process

    async def async_dispatch(self, request, *args, **kwargs):
        # adrf's, without its own hop to a thread for ``initial`` (see ``in_thread``), and with
        # the response rendered here, on the loop: Django would render it behind another hop.
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        self.checked = False
        method = request.method.lower()
        handler = getattr(self, method, None) if method in self.http_method_names else None
        try:
            if iscoroutinefunction(handler):
                response = await handler(request, *args, **kwargs)
                if not self.checked:
                    raise ImproperlyConfigured(f"{type(self).__name__}.{method} answered without in_thread's checks")
            else:  # OPTIONS, or a method the view does not answer
                response = await self.in_thread(handler or self.http_method_not_allowed, request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - as DRF's dispatch: handle_exception answers or re-raises
            response = self.handle_exception(exc)
        self.response = self.finalize_response(request, response, *args, **kwargs)
        self.response.render()
        return HttpResponse(self.response.content, status=self.response.status_code, headers=self.response.headers)

    async def in_thread(self, func, *args, **kwargs):
        """``func(*args, **kwargs)`` in the web worker's pool, giving its connections back; the
        request's checks run first, once."""

        def checked_call():
            if not self.checked:
                self.initial(self.request, *self.args, **self.kwargs)
                self.checked = True
            return func(*args, **kwargs)

        return await sync_to_async(returning_connections(checked_call))()


class ProcessTaskView(ProcessApiView):
    """A client task: put it in the schedule, then wait for the processor's answer."""

    post_permission = "change"
    task_type: str

    def prepare(self, namespace: str, process_id: str, task_request: services.TaskRequest) -> PreparedTask:
        return services.process_task_prepare(
            self.task_type, namespace=namespace, process_id=process_id, request=task_request
        )

    def prepare_request(self, namespace: str, process_id: str) -> PreparedTask:
        body = self.accepted["body"]
        task_request = services.TaskRequest(
            args=body["args"],
            idempotency_key=body["idempotency_key"],
            context=body["context"],
            history_range=body["range"],
        )
        return self.prepare(namespace, process_id, task_request)

    @accepts(body=s.TaskRequestSerializer)
    async def post(self, request, namespace, process_id):
        async with waiting.task_waiter_async() as wait:
            ended = await wait(await self.in_thread(self.prepare_request, namespace, process_id))
        return Response(s.ResponseSerializer({"response": services.task_result(ended)}).data)


_TASK_SCHEMA = {
    "request": s.TaskRequestSerializer,
    "responses": {
        200: s.ResponseSerializer,
        **error_responses(
            **{
                "409": "process already exists, or is not in the status the task needs"
                " (process is error / init / running)",
                "422": "The processor answered with an error (details.reason)",
                "504": "No answer within the namespace's process_step_timeout (the task still runs)",
            }
        ),
    },
}


class ProcessInitView(ProcessTaskView):
    post_permission = "add"

    def prepare(self, namespace, process_id, task_request):
        return services.process_init_prepare(namespace=namespace, process_id=process_id, request=task_request)

    @extend_schema(**_TASK_SCHEMA, summary="Start a process: run its init task and answer the processor's response")
    @accepts(body=s.TaskRequestSerializer)
    async def post(self, request, namespace, process_id):
        return await super().post(request, namespace, process_id)


class ProcessCallView(ProcessTaskView):
    task_type = "call"

    @extend_schema(**_TASK_SCHEMA, summary="Call a running process and answer the processor's response")
    @accepts(body=s.TaskRequestSerializer)
    async def post(self, request, namespace, process_id):
        return await super().post(request, namespace, process_id)


class ProcessRepairView(ProcessTaskView):
    operator_action = "process.repair"
    seed_call = True  # seed 001's client API
    task_type = "repair"

    def prepare(self, namespace, process_id, task_request):
        audit_id = process_audit_id(namespace=namespace, process_id=process_id)
        return audited_call(
            lambda: super(ProcessRepairView, self).prepare(namespace, process_id, task_request),
            request=self.request,
            action=self.operator_action,
            objects=[audit_id],
        )

    @extend_schema(**_TASK_SCHEMA, summary="Repair a process in error through its processor")
    @accepts(body=s.TaskRequestSerializer)
    async def post(self, request, namespace, process_id):
        return await super().post(request, namespace, process_id)


class ProcessSimpleRepairView(ProcessApiView):
    operator_action = "process.simple_repair"
    seed_call = True  # seed 001's client API
    post_permission = "change"

    @extend_schema(
        request=s.SimpleRepairSerializer, responses=s.ResponseSerializer, summary="Set a process in error running again"
    )
    @accepts(body=s.SimpleRepairSerializer)
    def post(self, request, namespace, process_id, *, body):
        audit_id = process_audit_id(namespace=namespace, process_id=process_id)
        audited_call(
            lambda: services.process_simple_repair(namespace=namespace, process_id=process_id, context=body["context"]),
            request=request,
            action=self.operator_action,
            objects=[audit_id],
        )
        return Response(s.ResponseSerializer({"response": "ok"}).data)


class ProcessGetView(ProcessApiView):
    @extend_schema(
        parameters=[s.RangeQuerySerializer], responses=s.ProcessSerializer, summary="A process with its history"
    )
    @accepts(query=s.RangeQuerySerializer)
    async def get(self, request, namespace, process_id):
        init = await self.in_thread(selectors.init_in_progress, namespace=namespace, process_id=process_id)
        if init is not None:  # wait for init to end, on the event loop
            await waiting.wait_for_task_async(init.task_id, timeout=init.timeout)
        found = await self.in_thread(
            selectors.process_get,
            namespace=namespace,
            process_id=process_id,
            history_range=self.accepted["query"],
            wait_for_init=False,
        )
        return Response(s.ProcessSerializer(found).data)

    put_permission = "add"

    @extend_schema(
        request=s.PutSerializer,
        responses={201: s.ResponseSerializer, **error_responses(**{"409": "process already exists"})},
        summary="Import a process with its history (and optionally a timer)",
    )
    @accepts(body=s.PutSerializer)
    async def put(self, request, namespace, process_id):
        await self.in_thread(self.put_request, namespace, process_id)
        return Response(s.ResponseSerializer({"response": "ok"}).data, status=201)

    def put_request(self, namespace, process_id):
        body = self.accepted["body"]
        services.process_put(namespace=namespace, process_id=process_id, process=body["process"], action=body["action"])


class ProcessTraceView(ProcessApiView):
    @extend_schema(responses=s.TraceSerializer, summary="Every task of a process, with its events")
    @accepts()
    def get(self, request, namespace, process_id):
        tasks = selectors.process_trace(namespace=namespace, process_id=process_id)
        return Response(s.TraceSerializer({"tasks": tasks}, context={"request": request}).data)  # args masked or not


class NamespaceHealthView(ProcessApiView):
    @extend_schema(
        responses=s.NamespaceHealthSerializer, summary="A namespace's health: processes by status, timers due"
    )
    @accepts()
    def get(self, request, namespace):
        return Response(s.NamespaceHealthSerializer(selectors.namespace_health(namespace=namespace)).data)
