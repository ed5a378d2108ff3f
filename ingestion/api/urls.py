from django.urls import path

from ingestion.api import views

urlpatterns = [
    path("runs", views.RunListView.as_view(), name="ingestion-runs"),
    path("runs/<uuid:run_id>", views.RunDetailView.as_view(), name="ingestion-run"),
    path("items", views.ItemListView.as_view(), name="ingestion-items"),
]
