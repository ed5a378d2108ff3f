from django.urls import path

from jobs.schedules.api import views

urlpatterns = [
    path("schedules", views.ScheduleListView.as_view(), name="schedules-list"),
    path("schedules/<int:schedule_id>", views.ScheduleDetailView.as_view(), name="schedules-detail"),
    path("schedules/<int:schedule_id>/pause", views.SchedulePauseView.as_view(), name="schedules-pause"),
    path("schedules/<int:schedule_id>/resume", views.ScheduleResumeView.as_view(), name="schedules-resume"),
    path("schedules/<int:schedule_id>/run", views.ScheduleRunView.as_view(), name="schedules-run"),
]
