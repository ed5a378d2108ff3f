from django.urls import path

from ingestion import pages

urlpatterns = [
    path("", pages.runs_page, name="ingestion-runs"),
    path("sources/<int:source_id>/run", pages.source_run, name="ingestion-source-run"),
    path("runs/<uuid:run_id>/", pages.run_page, name="ingestion-run"),
    path("runs/<uuid:run_id>/<str:action>", pages.run_action, name="ingestion-run-action"),
]
