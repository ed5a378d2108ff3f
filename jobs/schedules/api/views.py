"""Schedules for operators and daemons: list, create, read, change, delete, pause, resume, run now."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.schedules import selectors, services
from jobs.schedules.api import serializers as s
from jobs.schedules.models import Schedule
from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.authentication import request_caller
from pipeline_project.api.pagination import StrictCursorPagination
from pipeline_project.api.schema import error_responses
from pipeline_project.api.serializers import PageQuery
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import snapshot


class ScheduleView(DeclaredRequestMixin, APIView):
    permission_model = Schedule


def _schedule_response(request, schedule, status: int = 200) -> Response:
    # The request in the context: the args are masked unless its caller may view them.
    return Response(s.ScheduleSerializer(schedule, context={"request": request}).data, status=status)


def _changed_response(request, result) -> Response:
    schedule, changed = result
    answer = s.ScheduleChangedSerializer({"schedule": schedule, "changed": changed}, context={"request": request})
    return Response(answer.data)


class SchedulePagination(StrictCursorPagination):
    ordering = ("name",)
    page_size = 100
    max_page_size = 1000

    def position_is_valid(self, position: str) -> bool:
        return "\x00" not in position and len(position) <= 10_000  # a name; PostgreSQL's text holds no NUL


class ScheduleListView(ScheduleView, generics.ListAPIView):
    serializer_class = s.ScheduleSerializer
    pagination_class = SchedulePagination
    filter_backends = ()

    def get_queryset(self):
        return selectors.schedule_list()

    @extend_schema(summary="Schedules, by name, cursor-paginated")
    @accepts(query=PageQuery)
    def get(self, request, *, query):
        with snapshot():
            return self.list(request)

    @extend_schema(
        request=s.ScheduleCreateSerializer,
        responses={201: s.ScheduleSerializer, **error_responses(**{"409": "a schedule of that name exists"})},
        summary="Create a schedule (a cron expression in a time zone, or an interval)",
    )
    @accepts(body=s.ScheduleCreateSerializer)
    def post(self, request, *, body):
        return _schedule_response(
            request, services.schedule_create(values=body, by=request_caller(request)), status=201
        )


class ScheduleDetailView(ScheduleView):
    @extend_schema(responses=s.ScheduleSerializer, summary="A schedule, with its next five runs")
    @accepts()
    def get(self, request, schedule_id):
        return _schedule_response(request, selectors.schedule_get(schedule_id=schedule_id))

    @extend_schema(
        request=s.ScheduleChangeSerializer,
        responses={200: s.ScheduleSerializer, **error_responses(**{"409": "declared in code, or the name is taken"})},
        summary="Change some of a schedule's fields (a new timing starts at its first tick after now)",
    )
    @accepts(body=s.ScheduleChangeSerializer)
    def patch(self, request, schedule_id, *, body):
        return _schedule_response(
            request, services.schedule_update(schedule_id=schedule_id, changes=body, by=request_caller(request))
        )

    @extend_schema(request=None, responses={200: s.ScheduleSerializer}, summary="Delete a schedule (its jobs stay)")
    @accepts()
    def delete(self, request, schedule_id):
        return _schedule_response(request, services.schedule_delete(schedule_id=schedule_id))


class SchedulePauseView(ScheduleView):
    operator_action = "schedule.pause"
    post_permission = "change"

    @extend_schema(request=None, responses=s.ScheduleChangedSerializer, summary="Pause: its ticks are not enqueued")
    @accepts()
    def post(self, request, schedule_id):
        changed = audited_call(
            lambda: services.schedule_pause(schedule_id=schedule_id, by=request_caller(request)),
            request=request,
            action=self.operator_action,
            objects=[schedule_id],
            count=lambda changed: int(changed[1]),
        )
        return _changed_response(request, changed)


class ScheduleResumeView(ScheduleView):
    operator_action = "schedule.resume"
    post_permission = "change"

    @extend_schema(
        request=None,
        responses=s.ScheduleChangedSerializer,
        summary="Resume from the first tick after now (ticks that fell while paused are not run)",
    )
    @accepts()
    def post(self, request, schedule_id):
        changed = audited_call(
            lambda: services.schedule_resume(schedule_id=schedule_id, by=request_caller(request)),
            request=request,
            action=self.operator_action,
            objects=[schedule_id],
            count=lambda changed: int(changed[1]),
        )
        return _changed_response(request, changed)


class ScheduleRunView(ScheduleView):
    operator_action = "schedule.run_now"
    post_permission = "change"

    @extend_schema(request=None, responses={201: s.RunNowSerializer}, summary="Run now: enqueue one job of it")
    @accepts()
    def post(self, request, schedule_id):
        enqueued = audited_call(
            lambda: services.schedule_run_now(schedule_id=schedule_id, by=request_caller(request)),
            request=request,
            action=self.operator_action,
            objects=[schedule_id],
        )
        return Response(s.RunNowSerializer(enqueued).data, status=201)
