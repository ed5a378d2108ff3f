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
from pipeline_project.api.accepts import DeclaredRequestMixin, accepts
from pipeline_project.api.pagination import StrictCursorPagination
from pipeline_project.api.schema import error_responses
from pipeline_project.api.serializers import PageQuery
from pipeline_project.db.snapshot import snapshot


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


class ListView(DeclaredRequestMixin, generics.GenericAPIView):
    """A cursor-paginated list: its rows the selector's, filtered by the query its handler
    declares; read and serialized in one snapshot."""

    # Not a ListAPIView: its undeclared get would be refused; each list's get is its own, and its
    # schema says it answers a (paginated) list.
    filter_backends = ()  # the query serializer says what a query may filter

    def listed(self, selector, *, query: dict) -> Response:
        filters = {name: value for name, value in query.items() if name not in PageQuery.PAGINATION}
        with snapshot():
            page = self.paginate_queryset(selector(**filters))
            return self.get_paginated_response(self.get_serializer(page, many=True).data)


class RunListView(ListView):
    permission_model = IngestionRun
    post_permission = "add"
    serializer_class = s.RunSerializer
    pagination_class = RunPagination

    @extend_schema(
        parameters=[s.RunListQuery],
        responses=s.RunSerializer(many=True),
        summary="Runs, newest first, filtered and cursor-paginated",
    )
    @accepts(query=s.RunListQuery)
    def get(self, request, *, query):
        return self.listed(selectors.run_list, query=query)

    @extend_schema(
        request=s.RunCreateSerializer,
        responses={201: s.RunSerializer, **error_responses(**{"404": "No such source"})},
        summary="Create a pending run of a source",
    )
    @accepts(body=s.RunCreateSerializer)
    def post(self, request, *, body):
        run = services.run_create(**body)
        return _run_response(run.id, status=status.HTTP_201_CREATED)


class RunDetailView(DeclaredRequestMixin, APIView):
    permission_model = IngestionRun

    @extend_schema(responses=s.RunSerializer, summary="A run with its stats")
    @accepts()
    def get(self, request, run_id: uuid.UUID):
        return _run_response(run_id)

    @extend_schema(
        request=s.RunUpdateSerializer,
        responses={200: s.RunSerializer, **error_responses(**{"409": "The run's status cannot change that way"})},
        summary="Update a run's status, active stage, error message, stats or finish time",
    )
    @accepts(body=s.RunUpdateSerializer)
    def patch(self, request, run_id: uuid.UUID, *, body):
        services.run_update(run_id=run_id, **body)
        return _run_response(run_id)


class ItemListView(ListView):
    permission_model = IngestionItem
    post_permission = "change"
    serializer_class = s.ItemSerializer
    pagination_class = ItemPagination

    @extend_schema(
        parameters=[s.ItemListQuery],
        responses=s.ItemSerializer(many=True),
        summary="Items in id order, filtered and cursor-paginated",
    )
    @accepts(query=s.ItemListQuery)
    def get(self, request, *, query):
        return self.listed(selectors.item_list, query=query)

    @extend_schema(
        request=s.ItemsUpsertSerializer,
        responses={200: s.UpsertResultSerializer, **error_responses(**{"404": "An item's run does not exist"})},
        summary='Upsert one item (an object) or many ({"items": [...]}) by (run_id, item_key)',
    )
    @accepts(body=s.ItemsUpsertSerializer)
    def post(self, request, *, body):
        return Response(s.UpsertResultSerializer({"items": services.items_upsert(items=body["items"])}).data)
