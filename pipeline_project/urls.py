"""The project's URLconf: each app's routes, included by dotted path (it imports no app)."""

from django.contrib import admin
from django.urls import include, path

from pipeline_project.web import error_views

urlpatterns = [
    path("", include("pipeline_project.core.urls")),
    path("api/v1/pipeline/", include("tracking.api.urls")),
    path("api/v1/", include("jobs.queue.api.urls")),
    path("api/v1/", include("jobs.processes.api.urls")),
    path("api/v1/", include("jobs.schedules.api.urls")),
    path("api/v1/ingestion/", include("ingestion.api.urls")),
    path("sqlrs/v1/", include("jobs.dbstates.api.urls")),
    path("pipeline/", include("ingestion.page_urls")),
    path("demo/", include("pipeline_project.demo.urls")),
    path("admin/", admin.site.urls),
]

handler400 = error_views.bad_request
handler403 = error_views.permission_denied
handler404 = error_views.not_found
handler500 = error_views.server_error
