"""``@accepts``: every API handler declares its request, and takes nothing else.

The views here need no database: no authentication, any caller."""

import json
from inspect import iscoroutine, iscoroutinefunction

import pytest
from adrf.views import APIView as AsyncAPIView
from asgiref.sync import async_to_sync
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from pipeline_project.api.accepts import HANDLERS, DeclaredRequestMixin, accepts
from pipeline_project.api.serializers import RequestSerializer
from pipeline_project.core import views as core_views

factory = APIRequestFactory()


class LimitQuery(RequestSerializer):
    limit = serializers.IntegerField(default=10)


class NameBody(RequestSerializer):
    name = serializers.CharField()


class Open:
    authentication_classes = ()
    permission_classes = (AllowAny,)


class EchoView(Open, DeclaredRequestMixin, APIView):
    @accepts()
    def get(self, request):
        return Response({"answered": True})

    @accepts(query=LimitQuery, body=NameBody)
    def post(self, request, *, query, body):
        return Response({"query": query, "body": body})

    @accepts()
    def delete(self, request):
        return Response({"deleted": True})


class AsyncEchoView(Open, DeclaredRequestMixin, AsyncAPIView):
    @accepts(query=LimitQuery)
    async def get(self, request):
        return Response({"query": self.accepted["query"]})


async def awaited(answering):
    return await answering


def answer(view, request):
    response = view.as_view()(request)
    if iscoroutine(response):  # an async view's
        response = async_to_sync(awaited)(response)
    response.render()
    return response.status_code, response.data


def test_a_handler_that_declares_no_query_refuses_any_parameter():
    assert answer(EchoView, factory.get("/echo")) == (200, {"answered": True})

    code, body = answer(EchoView, factory.get("/echo?limit=3&verbose=1"))

    assert code == 400
    assert body == {
        "code": "validation_error",
        "message": "The request is invalid.",
        "details": {"limit": ["Unknown field."], "verbose": ["Unknown field."]},
    }


def test_a_declared_query_and_body_reach_the_handler_validated():
    code, body = answer(EchoView, factory.post("/echo?limit=3", {"name": "x"}, format="json"))

    assert (code, body) == (200, {"query": {"limit": 3}, "body": {"name": "x"}})


@pytest.mark.parametrize(
    ("query", "sent", "details"),
    [
        ("", {"name": "x", "nmae": "y"}, {"nmae": ["Unknown field."]}),
        ("", {}, {"name": ["This field is required."]}),
        ("?limit=x", {"name": "x"}, {"limit": ["A valid integer is required."]}),
    ],
)
def test_a_request_that_is_not_as_declared_is_a_400_naming_the_field(query, sent, details):
    code, body = answer(EchoView, factory.post(f"/echo{query}", sent, format="json"))

    assert (code, body["code"], body["details"]) == (400, "validation_error", details)


def test_a_body_is_validated_for_methods_with_one_only():
    # A GET's body is not its request (HTTP gives it no meaning): not read, not refused.
    with_body = factory.generic("GET", "/echo", json.dumps({"x": 1}), content_type="application/json")
    assert answer(EchoView, with_body)[0] == 200
    # A DELETE may carry one: declared by none, so none but an empty one is taken.
    assert answer(EchoView, factory.delete("/echo"))[0] == 200
    assert answer(EchoView, factory.delete("/echo", {}, format="json"))[0] == 200
    code, body = answer(EchoView, factory.delete("/echo", {"force": True}, format="json"))
    assert (code, body["details"]) == (400, {"force": ["Unknown field."]})


def test_an_async_handler_stays_a_coroutine_function_and_reads_its_request_once_checked():
    assert iscoroutinefunction(AsyncEchoView.get)
    assert AsyncEchoView.get.accepts == (LimitQuery, None)

    assert answer(AsyncEchoView, factory.get("/echo?limit=4")) == (200, {"query": {"limit": 4}})
    code, body = answer(AsyncEchoView, factory.get("/echo?limti=4"))
    assert (code, body["details"]) == (400, {"limti": ["Unknown field."]})


def test_a_handler_that_declares_no_request_does_not_load():
    with pytest.raises(TypeError, match=r"Careless\.put does not declare its request \(@accepts\)"):

        class Careless(DeclaredRequestMixin, APIView):
            @accepts()
            def get(self, request):
                return None

            def put(self, request):
                return None

    with pytest.raises(TypeError, match=r"InheritsOne\.get does not declare its request"):

        class InheritsOne(DeclaredRequestMixin, generics.ListAPIView):  # ListAPIView's own get
            pass

    with pytest.raises(TypeError, match=r"AsyncCareless\.get does not declare its request"):

        class AsyncCareless(DeclaredRequestMixin, AsyncAPIView):
            async def get(self, request):
                return None


# Every other API view is the project's: it declares what each of its handlers takes.
NOT_DECLARING = {
    core_views.StatusView: "a probe's: outside the API, answers whatever it is asked with",
    core_views.MetricsView: "Prometheus's scrape: outside the API",
    core_views.SchemaView: "drf-spectacular's (format, lang)",
    core_views.DocsView: "drf-spectacular's",
}


def api_views(patterns, prefix: str = ""):
    """``(route, view class)`` of every DRF view the urlconf routes to."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from api_views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "cls", None)
            if isinstance(view, type) and issubclass(view, APIView):
                yield prefix + str(pattern.pattern), view


def test_every_api_view_in_the_urlconf_declares_each_handlers_request():
    routes = list(api_views(get_resolver().url_patterns))
    undeclared = [
        f"{route}: {view.__name__}.{name}"
        for route, view in routes
        if view not in NOT_DECLARING
        for name in HANDLERS
        if hasattr(view, name) and not hasattr(getattr(view, name), "accepts")
    ]
    unguarded = [
        f"{route}: {view.__name__}"
        for route, view in routes
        if view not in NOT_DECLARING and not issubclass(view, DeclaredRequestMixin)
    ]

    assert len(routes) > 40  # the walk reached the API's routes
    assert {view for _route, view in routes} >= set(NOT_DECLARING)
    assert not undeclared, undeclared
    assert not unguarded, unguarded


@pytest.mark.parametrize("view", [EchoView, AsyncEchoView])
def test_allow_lists_the_methods_that_answer_and_options_is_not_one(view):
    """OPTIONS answers 405 (the schema describes the API); the Allow header says so."""
    handler = view.as_view()

    refused = handler(factory.options("/echo"))
    refused = async_to_sync(awaited)(refused) if iscoroutine(refused) else refused

    expected = "GET, POST, DELETE, HEAD" if view is EchoView else "GET, HEAD"
    assert (refused.status_code, refused["Allow"]) == (405, expected)
