"""The seed 000 pipeline API: thin views that validate, call one service and serialize."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.errors import NotFoundError
from pipeline_project.api.schema import error_responses
from tracking import selectors, services
from tracking.api import serializers as s
from tracking.models import QUEUE_STAGES, PipelineTracking

STAGE_PARAMETER = OpenApiParameter("stage", str, OpenApiParameter.PATH, enum=list(QUEUE_STAGES))


class TrackingView(DeclaredRequestMixin, APIView):
    permission_model = PipelineTracking
    post_permission = "change"  # moving rows through their stages


class FileDetailView(TrackingView):
    @extend_schema(responses=s.FileStatusResponseSerializer, summary="Statuses of every shard of a file")
    @accepts()
    def get(self, request, filename):
        filename = s.validate_filename(filename)
        shards = selectors.file_statuses(filename=filename)
        return Response(s.FileStatusResponseSerializer({"filename": filename, "shards": shards}).data)


class FileRegisterView(FileDetailView):
    # Subclassing the detail view keeps GET /files/register answering for a file named "register".
    post_permission = "add"

    @extend_schema(
        request=s.FileRegisterSerializer, responses=s.FileRegisterResponseSerializer, summary="Register a file"
    )
    @accepts(body=s.FileRegisterSerializer)
    def post(self, request, *, body):
        registration = services.file_register(filename=body["filename"], shards=body["shards"])
        return Response(s.FileRegisterResponseSerializer(registration).data)

    @extend_schema(exclude=True)
    @accepts()
    def get(self, request):
        return super().get(request, "register")


class EventIngestDoneView(TrackingView):
    @extend_schema(
        request=s.FileSerializer,
        responses={
            200: s.EventIngestDoneResponseSerializer,
            **error_responses(**{"404": "The file is not registered", "409": "A shard cannot move to done"}),
        },
        summary="Mark a file generated",
    )
    @accepts(body=s.FileSerializer)
    def post(self, request, *, body):
        updated_rows = services.event_ingest_mark_done(filename=body["filename"])
        done = {"filename": body["filename"], "updated_rows": updated_rows}
        return Response(s.EventIngestDoneResponseSerializer(done).data)


class StageTransitionView(TrackingView):
    @extend_schema(
        parameters=[
            STAGE_PARAMETER,
            OpenApiParameter("transition", str, OpenApiParameter.PATH, enum=list(services.TRANSITIONS)),
        ],
        request=s.ShardRowSerializer,
        responses={
            200: s.TransitionResponseSerializer,
            **error_responses(
                **{"409": "The row's status does not allow the transition, or its previous stage is not done"}
            ),
        },
        summary="Move one shard of a file through start, done, fail or retry",
    )
    @accepts(body=s.ShardRowSerializer)
    def post(self, request, stage, transition, *, body):
        stage = selectors.stage_get(slug=stage)
        if transition not in services.TRANSITIONS:
            raise NotFoundError(
                f"Unknown transition {transition!r}.",
                code="unknown_transition",
                details={"transitions": list(services.TRANSITIONS)},
            )
        status = services.stage_transition(stage=stage, transition=transition, **body)
        return Response(s.TransitionResponseSerializer({**body, "stage": stage.slug, "status": status}).data)


class ReadyRowsView(TrackingView):
    @extend_schema(
        parameters=[STAGE_PARAMETER, s.QueueQuerySerializer],
        responses=s.QueueResponseSerializer,
        summary="Rows ready for a stage, oldest first",
    )
    @accepts(query=s.QueueQuerySerializer)
    def get(self, request, stage, *, query):
        stage = selectors.stage_get(slug=stage)
        items = selectors.queue_list(stage=stage, **query)
        return Response(s.QueueResponseSerializer({"stage": stage.slug, "items": items}).data)


class ReadyRowsClaimView(TrackingView):
    @extend_schema(
        parameters=[STAGE_PARAMETER],
        request=s.QueueClaimSerializer,
        responses=s.QueueResponseSerializer,
        summary="Atomically take up to `limit` ready rows (they become `started`)",
    )
    @accepts(body=s.QueueClaimSerializer)
    def post(self, request, stage, *, body):
        stage = selectors.stage_get(slug=stage)
        items = services.queue_claim(stage=stage, limit=body["limit"])
        return Response(s.QueueResponseSerializer({"stage": stage.slug, "items": items}).data)


class MetricsSummaryView(TrackingView):
    @extend_schema(responses=s.MetricsSummarySerializer, summary="Counts by stage and by shard")
    @accepts()
    def get(self, request):
        return Response(s.MetricsSummarySerializer(selectors.metrics_summary()).data)
