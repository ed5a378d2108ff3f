from django.urls import path, re_path

from jobs.dbstates.api import views
from jobs.dbstates.api.errors import route_not_found

# sqlrs's paths: an instance is named by id or by name, a state by id. Any other path under
# /sqlrs/v1 is sqlrs's 404, whatever the method.
urlpatterns = [
    path("health", views.HealthView.as_view(), name="sqlrs-health"),
    path("config", views.ConfigView.as_view(), name="sqlrs-config"),
    path("config/schema", views.ConfigSchemaView.as_view(), name="sqlrs-config-schema"),
    path("cache/status", views.CacheStatusView.as_view(), name="sqlrs-cache-status"),
    path("cache/explain/prepare", views.CacheExplainView.as_view(), name="sqlrs-cache-explain"),
    path("prepare-jobs", views.PrepareJobsView.as_view(), name="sqlrs-prepare-jobs"),
    path("prepare-jobs/<str:job_id>", views.PrepareJobView.as_view(), name="sqlrs-prepare-job"),
    path("prepare-jobs/<str:job_id>/cancel", views.PrepareJobCancelView.as_view(), name="sqlrs-prepare-job-cancel"),
    path("prepare-jobs/<str:job_id>/events", views.PrepareJobEventsView.as_view(), name="sqlrs-prepare-job-events"),
    path("tasks", views.TasksView.as_view(), name="sqlrs-tasks"),
    path("instances", views.InstancesView.as_view(), name="sqlrs-instances"),
    path("instances/<str:ref>", views.InstanceView.as_view(), name="sqlrs-instance"),
    path("names", views.NamesView.as_view(), name="sqlrs-names"),
    path("names/<str:name>", views.NameView.as_view(), name="sqlrs-name"),
    path("runs", views.RunsView.as_view(), name="sqlrs-runs"),
    path("states", views.StatesView.as_view(), name="sqlrs-states"),
    path("states/<str:state_id>", views.StateView.as_view(), name="sqlrs-state"),
    re_path(r"^.*$", route_not_found, name="sqlrs-no-route"),
]
