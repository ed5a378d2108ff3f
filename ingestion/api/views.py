"""``/api/v1/ingestion/...``: runs and items for external workers (seed 004), thin views."""

import uuid

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ingestion import selectors, services
from ingestion.api import serializers as s
from ingestion.models import IngestionItem, IngestionRun
from pipeline_project.core.pagination import StrictCursorPagination
from pipeline_project.core.schema import error_responses
from pipeline_project.core.snapshot import snapshot
from pipeline_project.core.validation import validated


def _run_response(run_id: uuid.UUID, **kwargs) -> Response:
    """The run as it is now (a 404 if it is gone), read and serialized in one snapshot."""
    with snapshot():
        return Response(s.RunSerializer(selectors.run_get(run_id=run_id)).data, **kwargs)


class RunPagination(StrictCursorPagination):
    ordering = ("-created_at",)
    page_size = 50
    max_page_size = 500

    def position_is_valid(self, position: str) -> bool:
        try:
            return parse_datetime(position) is not None
        except ValueError:
            return False


class ItemPagination(StrictCursorPagination):
    ordering = ("id",)
    page_size = 100
    max_page_size = 1000

    def position_is_valid(self, position: str) -> bool:
        return position.isascii() and position.isdigit() and len(position) < 19


class ListView(generics.ListAPIView):
    """A cursor-paginated list: its query validated by ``query_serializer``, its rows the
    selector's, filtered by it; read and serialized in one snapshot."""

    query_serializer: type[s.ListQuery]
    filter_backends = ()  # the query serializer says what a query may filter

    def listed(self, request, selector) -> Response:
        query = validated(self.query_serializer, request.query_params)
        filters = {name: value for name, value in query.items() if name not in s.ListQuery.PAGINATION}
        with snapshot():
            page = self.paginate_queryset(selector(**filters))
            return self.get_paginated_response(self.get_serializer(page, many=True).data)


class RunListView(ListView):
    permission_model = IngestionRun
    post_permission = "add"
    serializer_class = s.RunSerializer
    query_serializer = s.RunListQuery
    pagination_class = RunPagination

    @extend_schema(parameters=[s.RunListQuery], summary="Runs, newest first, filtered and cursor-paginated")
    def get(self, request):
        return self.listed(request, selectors.run_list)

    @extend_schema(
        request=s.RunCreateSerializer,
        responses={201: s.RunSerializer, **error_responses(**{"404": "No such source"})},
        summary="Create a pending run of a source",
    )
    def post(self, request):
        body = validated(s.RunCreateSerializer, request.data)
        run = services.run_create(**body)
        return _run_response(run.id, status=status.HTTP_201_CREATED)


class RunDetailView(APIView):
    permission_model = IngestionRun

    @extend_schema(responses=s.RunSerializer, summary="A run with its stats")
    def get(self, request, run_id: uuid.UUID):
        validated(s.NoQuery, request.query_params)
        return _run_response(run_id)

    @extend_schema(
        request=s.RunUpdateSerializer,
        responses={200: s.RunSerializer, **error_responses(**{"409": "The run's status cannot change that way"})},
        summary="Update a run's status, active stage, error message, stats or finish time",
    )
    def patch(self, request, run_id: uuid.UUID):
        body = validated(s.RunUpdateSerializer, request.data)
        services.run_update(run_id=run_id, **body)
        return _run_response(run_id)


class ItemListView(ListView):
    permission_model = IngestionItem
    post_permission = "change"
    serializer_class = s.ItemSerializer
    query_serializer = s.ItemListQuery
    pagination_class = ItemPagination

    @extend_schema(parameters=[s.ItemListQuery], summary="Items in id order, filtered and cursor-paginated")
    def get(self, request):
        return self.listed(request, selectors.item_list)

    @extend_schema(
        request=s.ItemsUpsertSerializer,
        responses={200: s.UpsertResultSerializer, **error_responses(**{"404": "An item's run does not exist"})},
        summary='Upsert one item (an object) or many ({"items": [...]}) by (run_id, item_key)',
    )
    def post(self, request):
        body = validated(s.ItemsUpsertSerializer, request.data)
        return Response(s.UpsertResultSerializer({"items": services.items_upsert(items=body["items"])}).data)
