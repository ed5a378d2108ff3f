from django.urls import path

from jobs.processes.api import views

# Namespaces and process ids are single path segments; ids may hold any other character.
urlpatterns = [
    path("processes/<str:namespace>/health", views.NamespaceHealthView.as_view(), name="processes-health"),
    path("processes/<str:namespace>/<str:process_id>", views.ProcessGetView.as_view(), name="processes-get"),
    path("processes/<str:namespace>/<str:process_id>/init", views.ProcessInitView.as_view(), name="processes-init"),
    path("processes/<str:namespace>/<str:process_id>/call", views.ProcessCallView.as_view(), name="processes-call"),
    path(
        "processes/<str:namespace>/<str:process_id>/repair", views.ProcessRepairView.as_view(), name="processes-repair"
    ),
    path(
        "processes/<str:namespace>/<str:process_id>/simple_repair",
        views.ProcessSimpleRepairView.as_view(),
        name="processes-simple-repair",
    ),
    path("processes/<str:namespace>/<str:process_id>/trace", views.ProcessTraceView.as_view(), name="processes-trace"),
]
