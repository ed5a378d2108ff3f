"""A URLconf for the core tests: the project's routes, plus views that fail in every way a view
can, under a JSON path of each shape (/api/, /sqlrs/) and an HTML one (/pages/), one that
says how much of a body it received, and two that say which thread they ran in."""

import threading

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.urls import path
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from pipeline_project.urls import handler400, handler403, handler404, handler500
from pipeline_project.urls import urlpatterns as project_urlpatterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]

RAISED = {
    "permission": PermissionDenied,
    "suspicious": SuspiciousOperation,
    "bad-request": BadRequest,
    "not-found": Http404,
    "crash": RuntimeError,
}


class GetOnly(View):
    def get(self, request):
        return HttpResponse("ok")


def raising(request, kind):
    raise RAISED[kind]("boom")


def html_error(request):
    return HttpResponseBadRequest("<h1>Bad</h1>")


def own_json_error(request):
    return JsonResponse({"custom": True}, status=409)


@csrf_exempt
def body_length(request):
    return JsonResponse({"received": len(request.body)})


@csrf_exempt
def thread_of_sync_view(request):
    return JsonResponse({"view": threading.current_thread().name})


@csrf_exempt
async def thread_of_async_view(request):
    synchronous_part = await sync_to_async(lambda: threading.current_thread().name)()
    return JsonResponse({"view": threading.current_thread().name, "synchronous_part": synchronous_part})


def routes(prefix: str) -> list:
    return [
        path(f"{prefix}get-only", GetOnly.as_view()),
        path(f"{prefix}raise/<str:kind>", raising),
        path(f"{prefix}html-error", html_error),
        path(f"{prefix}own-json-error", own_json_error),
        path(f"{prefix}body-length", body_length),
        path(f"{prefix}thread/sync", thread_of_sync_view),
        path(f"{prefix}thread/async", thread_of_async_view),
    ]


urlpatterns = [*routes("api/test/"), *routes("sqlrs/test/"), *routes("pages/"), *project_urlpatterns]
