from django.urls import path

from tracking.api import views

urlpatterns = [
    path("files/register", views.FileRegisterView.as_view(), name="tracking-file-register"),
    path("files/<str:filename>", views.FileDetailView.as_view(), name="tracking-file-detail"),
    path("stages/event-ingest/done", views.EventIngestDoneView.as_view(), name="tracking-event-ingest-done"),
    path("stages/<str:stage>/<str:transition>", views.StageTransitionView.as_view(), name="tracking-stage-transition"),
    path("queues/<str:stage>", views.ReadyRowsView.as_view(), name="tracking-queue"),
    path("queues/<str:stage>/claim", views.ReadyRowsClaimView.as_view(), name="tracking-queue-claim"),
    path("metrics/summary", views.MetricsSummaryView.as_view(), name="tracking-metrics-summary"),
]
