"""Service endpoints outside the versioned API: /health, /status, /metrics, the schema and its docs
(routed by ``pipeline_project.core.urls``; the probe port serves ``PROBE_ANSWERS``, named in
``settings.WEB_PROBE_ANSWERS``)."""

import functools

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from pipeline_project.api.errors import json_error
from pipeline_project.api.rendering import JSONAnswer
from pipeline_project.core import selectors
from pipeline_project.core.metrics import metrics_registry


def reads_only(answer):
    """``answer`` for GET and HEAD; any other method gets 405 in the path's error shape."""

    @functools.wraps(answer)
    def read(request):
        if request.method not in ("GET", "HEAD"):
            response = json_error(request.path, 405, "method_not_allowed", f'Method "{request.method}" not allowed.')
            response["Allow"] = "GET, HEAD"
            return response
        return answer(request)

    return read


@csrf_exempt  # a POST gets reads_only's 405, not a CSRF page
@reads_only
def health(request):
    """Liveness: answers without touching the database."""
    return JSONAnswer({"status": "ok"})


@reads_only
def status_answer(request):
    """Readiness: databases reachable, migrations applied, and what the apps report (503 if not)."""
    document = selectors.system_status()
    response = HttpResponse(
        JSONRenderer().render(document),
        status=200 if document["status"] == "ok" else 503,
        content_type=JSONRenderer.media_type,
    )
    response._has_been_logged = True  # "not ready" is this page's answer, not the server's error
    return response


@reads_only
def metrics_answer(request):
    """Prometheus text format."""
    return HttpResponse(generate_latest(metrics_registry()), content_type=CONTENT_TYPE_LATEST)


# What the probe port serves (settings.WEB_PROBE_PORT), with no token: settings.WEB_PROBE_ANSWERS.
PROBE_ANSWERS = {"/health": health, "/status": status_answer, "/metrics": metrics_answer}


@extend_schema(exclude=True)
class StatusView(APIView):
    """/status for a token or a staff session (the probe port answers it without)."""

    def get(self, request):
        return status_answer(request)


@extend_schema(exclude=True)
class MetricsView(APIView):
    """/metrics for a token or a staff session (the probe port answers it without)."""

    def get(self, request):
        return metrics_answer(request)


class ErrorsAsJSONMixin:
    """Errors in the API's error shape, whatever renders the success (YAML, the Swagger page)."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.status_code >= 400:
            response.accepted_renderer, response.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return response


class SchemaView(ErrorsAsJSONMixin, SpectacularAPIView):
    pass


class DocsView(ErrorsAsJSONMixin, SpectacularSwaggerView):
    pass
