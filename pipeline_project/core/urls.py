"""The service's own endpoints: / (the console), /health, /status, /metrics, the API's schema and its docs."""

from django.urls import path
from django.views.generic import RedirectView

from pipeline_project.core import views

urlpatterns = [
    path("", RedirectView.as_view(url="/admin/"), name="home"),  # the console
    path("health", views.health, name="health"),
    path("status", views.StatusView.as_view(), name="status"),
    path("metrics", views.MetricsView.as_view(), name="metrics"),
    path("api/v1/schema", views.SchemaView.as_view(), name="api-schema"),
    path("api/v1/docs", views.DocsView.as_view(url_name="api-schema"), name="api-docs"),
]
