"""The seed 002 jobs API (trigger, status, cancel) and seed 003 conventions (list, NDJSON events, delete)."""

import json
import time

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs import selectors, services
from jobs.api import serializers as s
from jobs.api.filters import JobFilter
from jobs.models import FINISHED_STATUSES
from pipeline_project.core.models import ApiToken
from pipeline_project.core.validation import validated

EVENTS_PAGE = 500
NDJSON = "application/x-ndjson"


def _caller(request) -> str:
    """Who is asking: the token's daemon name or the staff member's username."""
    if isinstance(request.auth, ApiToken):
        return request.auth.name
    return request.user.get_username()


def _job_response(job_id) -> Response:
    return Response(s.JobSerializer(selectors.job_get(job_id=job_id)).data)


class JobTriggerView(APIView):
    @extend_schema(
        request=s.JobTriggerSerializer,
        responses={
            201: s.EnqueuedSerializer,
            200: s.EnqueuedSerializer,
            409: OpenApiResponse(description="idempotency_key names a different job"),
        },
        summary="Enqueue a job (idempotent on idempotency_key)",
    )
    def post(self, request):
        data = validated(s.JobTriggerSerializer, request.data)
        enqueued = services.job_enqueue(spec=s.job_spec(data, producer=_caller(request)))
        return Response(s.EnqueuedSerializer(enqueued).data, status=201 if enqueued.created else 200)


class JobBulkTriggerView(APIView):
    @extend_schema(
        request=s.JobBulkTriggerSerializer,
        responses=s.EnqueuedListSerializer,
        summary=f"Enqueue up to {s.MAX_BULK} jobs in one statement (all or nothing)",
    )
    def post(self, request):
        data = validated(s.JobBulkTriggerSerializer, request.data)
        producer = _caller(request)
        enqueued = services.job_enqueue_many(specs=[s.job_spec(item, producer=producer) for item in data["jobs"]])
        created = any(item.created for item in enqueued)
        return Response(s.EnqueuedListSerializer({"jobs": enqueued}).data, status=201 if created else 200)


class JobStatusView(APIView):
    @extend_schema(responses=s.JobSerializer, summary="A job's status, progress and error")
    def get(self, request, job_id):
        return _job_response(job_id)


class JobCancelView(APIView):
    @extend_schema(
        request=None,
        responses={200: s.JobSerializer, 409: OpenApiResponse(description="The job already finished")},
        summary="Cancel: a queued job at once, a running one between chunks",
    )
    def post(self, request, job_id):
        services.job_cancel(job_id=job_id, requested_by=_caller(request))
        return _job_response(job_id)


class JobPagination(CursorPagination):
    ordering = ("-job_id",)  # UUIDv7: newest first, served by the primary key
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        # DRF quietly ignores a page_size it cannot parse; a caller with a typo should hear about it.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isdigit() and int(raw) > 0):
            raise ValidationError({self.page_size_query_param: ["A positive integer is required."]})
        return super().get_page_size(request)


class JobListView(generics.ListAPIView):
    serializer_class = s.JobSerializer
    filterset_class = JobFilter
    pagination_class = JobPagination

    def get_queryset(self):
        return selectors.job_list()

    @extend_schema(summary="Jobs, newest first, filtered and cursor-paginated")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class JobDetailView(APIView):
    @extend_schema(responses=s.JobSerializer, summary="A job")
    def get(self, request, job_id):
        return _job_response(job_id)

    @extend_schema(
        parameters=[s.DeleteQuerySerializer],
        responses={200: s.DeletionSerializer, 409: OpenApiResponse(description="The job is running (use force=true)")},
        summary="Delete a job and its events",
    )
    def delete(self, request, job_id):
        query = validated(s.DeleteQuerySerializer, request.query_params)
        deletion = services.job_delete(job_id=job_id, **query)
        return Response(s.DeletionSerializer(deletion).data)


class JobEventsView(APIView):
    @extend_schema(
        parameters=[
            s.EventsQuerySerializer,
            OpenApiParameter("Last-Event-ID", int, OpenApiParameter.HEADER, required=False),
        ],
        responses={(200, NDJSON): OpenApiTypes.STR},
        summary="The job's journal as NDJSON, one event per line; follows until the job finishes",
    )
    def get(self, request, job_id):
        query = validated(s.EventsQuerySerializer, request.query_params)
        after = query["after"]
        if not after and request.headers.get("Last-Event-ID", "").isdigit():
            after = int(request.headers["Last-Event-ID"])
        selectors.job_get(job_id=job_id)  # 404 before the stream starts
        stream = _event_lines(job_id, after=after, follow=query["follow"])
        return StreamingHttpResponse(
            stream, content_type=NDJSON, headers={"X-Accel-Buffering": "no", "Cache-Control": "no-store"}
        )


def _event_lines(job_id, *, after: int, follow: bool):
    """Yield events in order; when following, wait for new ones until the job is finished."""
    deadline = time.monotonic() + settings.DL_EVENTS_MAX_FOLLOW_SEC
    pause = settings.DL_EVENTS_POLL_SEC
    while True:
        events = selectors.job_events(job_id=job_id, after=after, limit=EVENTS_PAGE)
        for event in events:
            yield json.dumps(s.JobEventSerializer(event).data, default=str) + "\n"
            after = event.event_id
        if len(events) == EVENTS_PAGE:
            continue
        if not follow:
            return
        status = selectors.job_status(job_id=job_id)
        if status is None or time.monotonic() >= deadline:
            return
        if status in FINISHED_STATUSES:
            follow = False  # the finishing statement wrote its event with the status: read once more
            continue
        time.sleep(pause)
