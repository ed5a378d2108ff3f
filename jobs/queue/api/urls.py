from django.urls import path

from jobs.queue.api import views

urlpatterns = [
    path("jobs", views.JobListView.as_view(), name="jobs-list"),
    path("jobs/trigger", views.JobTriggerView.as_view(), name="jobs-trigger"),
    path("jobs/trigger/bulk", views.JobBulkTriggerView.as_view(), name="jobs-trigger-bulk"),
    path("jobs/retry", views.JobRetryMatchingView.as_view(), name="jobs-retry-matching"),
    path("jobs/cancel", views.JobCancelMatchingView.as_view(), name="jobs-cancel-matching"),
    path("jobs/delete", views.JobDeleteMatchingView.as_view(), name="jobs-delete-matching"),
    path("jobs/<uuid:job_id>", views.JobDetailView.as_view(), name="jobs-detail"),
    path("jobs/<uuid:job_id>/status", views.JobStatusView.as_view(), name="jobs-status"),
    path("jobs/<uuid:job_id>/cancel", views.JobCancelView.as_view(), name="jobs-cancel"),
    path("jobs/<uuid:job_id>/events", views.JobEventsView.as_view(), name="jobs-events"),
    path("queues", views.QueueListView.as_view(), name="queues-list"),
    # Queue names may hold slashes.
    path("queues/<path:queue>/pause", views.QueuePauseView.as_view(), name="queues-pause"),
    path("queues/<path:queue>/resume", views.QueueResumeView.as_view(), name="queues-resume"),
    path("queues/<path:queue>/limits", views.QueueLimitsView.as_view(), name="queues-limits"),
]
