"""The seed 002 jobs API (trigger, status, cancel), seed 003 conventions (list, NDJSON events,
delete), and the operators' controls (bulk actions over a filter, queues)."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.queue import selectors, services
from jobs.queue.api import serializers as s
from jobs.queue.api.filters import JobFilter
from jobs.queue.api.streams import events_response
from jobs.queue.models import Job, Queue
from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.authentication import request_caller
from pipeline_project.api.pagination import StrictCursorPagination
from pipeline_project.api.schema import error_responses
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import snapshot
from pipeline_project.web.ndjson import NDJSON


def _job_response(job_id, request) -> Response:
    with snapshot():  # the job and its links as of one moment
        job = selectors.job_get(job_id=job_id)
        links = selectors.job_dependencies(job_id=job_id)
    job.upstream, job.downstream = links["upstream"], links["downstream"]
    return Response(s.JobDetailSerializer(job, context={"request": request}).data)  # args masked as it may see them


class JobView(DeclaredRequestMixin, APIView):
    permission_model = Job


class JobTriggerView(JobView):
    @extend_schema(
        request=s.JobTriggerSerializer,
        responses={
            201: s.EnqueuedSerializer,
            200: s.EnqueuedSerializer,
            **error_responses(**{"409": "idempotency_key names a different job"}),
        },
        summary="Enqueue a job (idempotent on idempotency_key)",
    )
    @accepts(body=s.JobTriggerSerializer)
    def post(self, request, *, body):
        [enqueued] = services.job_trigger_many(specs=[s.job_spec(body, producer=request_caller(request))])
        return Response(s.EnqueuedSerializer(enqueued).data, status=201 if enqueued.created else 200)


class JobBulkTriggerView(JobView):
    @extend_schema(
        request=s.JobBulkTriggerSerializer,
        responses={
            201: s.EnqueuedListSerializer,
            200: s.EnqueuedListSerializer,
            **error_responses(**{"409": "an idempotency_key names a different job (nothing is written)"}),
        },
        summary=f"Enqueue up to {s.MAX_BULK} jobs in one statement (all or nothing; 201 if any is new)",
    )
    @accepts(body=s.JobBulkTriggerSerializer)
    def post(self, request, *, body):
        producer = request_caller(request)
        enqueued = services.job_trigger_many(specs=[s.job_spec(item, producer=producer) for item in body["jobs"]])
        created = any(item.created for item in enqueued)
        return Response(s.EnqueuedListSerializer({"jobs": enqueued}).data, status=201 if created else 200)


class JobStatusView(JobView):
    @extend_schema(responses=s.JobDetailSerializer, summary="A job's status, progress and error")
    @accepts()
    def get(self, request, job_id):
        return _job_response(job_id, request)


class JobCancelView(JobView):
    operator_action = "job.cancel"
    seed_call = True  # seed 002's cancel
    post_permission = "change"

    @extend_schema(
        request=None,
        responses={200: s.JobDetailSerializer, **error_responses(**{"409": "The job already finished"})},
        summary="Cancel: a queued job at once, a running one between chunks (a repeat answers 200)",
    )
    @accepts()
    def post(self, request, job_id):
        audited_call(
            lambda: services.job_cancel(job_id=job_id, requested_by=request_caller(request)),
            request=request,
            action=self.operator_action,
            objects=[job_id],
            detail=lambda outcome: {"outcome": outcome},
        )
        return _job_response(job_id, request)


class JobPagination(StrictCursorPagination):
    ordering = ("-job_id",)  # UUIDv7: newest first, served by the primary key
    page_size = 50
    max_page_size = 500

    def position_is_valid(self, position: str) -> bool:
        try:
            uuid.UUID(position)
        except ValueError:
            return False
        return True


class JobListView(DeclaredRequestMixin, generics.ListAPIView):
    permission_model = Job
    serializer_class = s.JobSerializer
    filterset_class = JobFilter
    pagination_class = JobPagination

    def get_queryset(self):
        return selectors.job_list()

    @extend_schema(summary="Jobs, newest first, filtered and cursor-paginated")
    @accepts(query=s.JobListQuery)
    def get(self, request, *, query):
        return self.list(request)  # JobFilter and the paginator read ``query``'s parameters themselves


class JobDetailView(JobView):
    operator_action = "job.delete"

    @extend_schema(responses=s.JobDetailSerializer, summary="A job")
    @accepts()
    def get(self, request, job_id):
        return _job_response(job_id, request)

    @extend_schema(
        parameters=[s.DeleteQuerySerializer],
        responses={200: s.DeletionSerializer, **error_responses(**{"409": "The job is running (use force=true)"})},
        summary="Delete a job and its events",
    )
    @accepts(query=s.DeleteQuerySerializer)
    def delete(self, request, job_id, *, query):
        deletion = audited_call(
            lambda: services.job_delete(job_id=job_id, **query),
            request=request,
            action=self.operator_action,
            objects=[job_id],
            detail=lambda deletion: {"force": query["force"]},
        )
        return Response(s.DeletionSerializer(deletion).data)


class JobEventsView(JobView):
    @extend_schema(
        parameters=[
            s.EventsQuerySerializer,
            OpenApiParameter("Last-Event-ID", str, OpenApiParameter.HEADER, required=False, pattern=r"^[0-9]+$"),
        ],
        responses={(200, NDJSON): OpenApiTypes.STR},
        summary="The job's journal as NDJSON, one event per line; follows until the job finishes",
    )
    @accepts(query=s.EventsQuerySerializer)
    def get(self, request, job_id, *, query):
        selectors.job_get(job_id=job_id)  # 404 before the stream starts
        return events_response(job_id, after=query["after"], follow=query["follow"])


class JobBulkActionView(JobView):
    """Retry, cancel or delete every job the list's filters match (a dry run counts them first)."""

    post_permission = "change"

    def act(self, request, selection: services.Selection, body: dict) -> services.Counts:
        raise NotImplementedError

    @accepts(body=s.BulkActionSerializer)
    def post(self, request, *, body):
        filterset = JobFilter(data=body["filters"], queryset=selectors.job_list(), request=request)
        if not filterset.is_valid():
            raise ValidationError({"filters": filterset.errors})
        counts = audited_call(
            lambda: self.act(request, services.Selection.of_queryset(filterset.qs), body),
            request=request,
            action=self.operator_action,
            filter=body["filters"],
            record=not body["dry_run"],
            count=lambda counts: counts.changed,
            detail=lambda counts: {"matched": counts.matched, "requested": counts.requested},
        )
        return Response(s.CountsSerializer(counts).data)


_BULK_SCHEMA = {"request": s.BulkActionSerializer, "responses": s.CountsSerializer}


@extend_schema_view(
    post=extend_schema(
        **_BULK_SCHEMA,
        operation_id="jobs_retry_matching",
        summary="Retry every failed, canceled or lost job the filters match",
    )
)
class JobRetryMatchingView(JobBulkActionView):
    operator_action = "job.retry"

    def act(self, request, selection, body):
        return services.jobs_retry(selection=selection, by=request_caller(request), dry_run=body["dry_run"])


@extend_schema_view(
    post=extend_schema(
        **_BULK_SCHEMA,
        operation_id="jobs_cancel_matching",
        summary="Cancel every queued or running job the filters match",
    )
)
class JobCancelMatchingView(JobBulkActionView):
    operator_action = "job.cancel"

    def act(self, request, selection, body):
        return services.jobs_cancel(selection=selection, by=request_caller(request), dry_run=body["dry_run"])


@extend_schema_view(
    post=extend_schema(
        **_BULK_SCHEMA,
        operation_id="jobs_delete_matching",
        summary="Delete every job the filters match (running ones only with force)",
    )
)
class JobDeleteMatchingView(JobBulkActionView):
    operator_action = "job.delete"
    post_permission = "delete"

    def act(self, request, selection, body):
        return services.jobs_delete(selection=selection, force=body["force"], dry_run=body["dry_run"])


class QueueView(DeclaredRequestMixin, APIView):
    permission_model = Queue


class QueueListView(QueueView):
    @extend_schema(responses=s.QueueSerializer(many=True), summary="Queues: depth by status, paused or not")
    @accepts()
    def get(self, request):
        return Response(s.QueueSerializer(selectors.queues(), many=True).data)


class QueuePauseView(QueueView):
    operator_action = "queue.pause"
    post_permission = "change"

    @extend_schema(
        request=s.QueuePauseSerializer,
        responses=s.QueueChangeSerializer,
        summary="Pause a queue: no worker claims from it",
    )
    @accepts(body=s.QueuePauseSerializer)
    def post(self, request, queue, *, body):
        changed = audited_call(
            lambda: services.queue_pause(queue=queue, by=request_caller(request), **body),
            request=request,
            action=self.operator_action,
            objects=[queue],
            count=int,
        )
        return Response(s.QueueChangeSerializer({"queue": queue, "paused": True, "changed": changed}).data)


class QueueLimitsView(QueueView):
    operator_action = "queue.limits"

    @extend_schema(
        request=s.QueueLimitsSerializer,
        responses=s.QueueLimitsOutSerializer,
        summary="Set a queue's limits (running at once, started per period; per partition_key or not)",
    )
    @accepts(body=s.QueueLimitsSerializer)
    def put(self, request, queue, *, body):
        limits = audited_call(
            lambda: services.queue_limits_set(queue=queue, by=request_caller(request), **body),
            request=request,
            action=self.operator_action,
            objects=[queue],
            detail=lambda limits: body,
        )
        return Response(s.QueueLimitsOutSerializer(limits).data)


class QueueResumeView(QueueView):
    operator_action = "queue.resume"
    post_permission = "change"

    @extend_schema(
        request=None, responses=s.QueueChangeSerializer, summary="Resume a queue: workers claim from it at once"
    )
    @accepts()
    def post(self, request, queue):
        changed = audited_call(
            lambda: services.queue_resume(queue=queue, by=request_caller(request)),
            request=request,
            action=self.operator_action,
            objects=[queue],
            count=int,
        )
        return Response(s.QueueChangeSerializer({"queue": queue, "paused": False, "changed": changed}).data)
