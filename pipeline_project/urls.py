from django.contrib import admin
from django.urls import include, path

from pipeline_project.core import views

urlpatterns = [
    path("health", views.health, name="health"),
    path("status", views.StatusView.as_view(), name="status"),
    path("metrics", views.MetricsView.as_view(), name="metrics"),
    path("api/v1/schema", views.SchemaView.as_view(), name="api-schema"),
    path("api/v1/docs", views.DocsView.as_view(url_name="api-schema"), name="api-docs"),
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

handler400 = views.bad_request
handler403 = views.permission_denied
handler404 = views.not_found
handler500 = views.server_error
