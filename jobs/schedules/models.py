"""``dl_schedules``: what to enqueue (task, args, queue, priority, lock key), when (a cron
expression in a time zone, or an interval), what to do with ticks missed while no worker ran,
and where the schedule stands (paused, next run, last tick and its job)."""

from django.db import models
from django.db.models import Q


class MissedPolicy(models.TextChoices):
    SKIP = "skip", "skip"
    ONCE = "once", "once"
    CATCH_UP = "catch_up", "catch up"


class Schedule(models.Model):
    id = models.BigAutoField(primary_key=True)
    name = models.TextField(unique=True)
    task = models.TextField()
    args = models.JSONField(default=dict, blank=True)
    queue = models.TextField()
    priority = models.IntegerField()
    lock_key = models.TextField(null=True, blank=True, help_text="Empty: schedule:NAME, so its runs never overlap.")
    cron = models.TextField(null=True, blank=True, help_text="Five fields: minute hour day-of-month month day-of-week.")
    interval_sec = models.IntegerField(null=True, blank=True, help_text="Or every N seconds (ticks at multiples of N).")
    timezone = models.TextField(help_text="IANA name (Europe/Prague); the cron expression is read in it.")
    missed_policy = models.TextField(choices=MissedPolicy)
    catch_up_max = models.IntegerField(help_text="catch_up: at most this many missed ticks are run.")
    paused = models.BooleanField(default=False)
    next_run_at = models.DateTimeField()
    last_tick_at = models.DateTimeField(null=True, blank=True)
    last_job_id = models.UUIDField(null=True, blank=True)
    last_skipped = models.IntegerField(default=0, help_text="Missed ticks the last enqueue skipped.")
    last_skipped_at = models.DateTimeField(null=True, blank=True)
    declared_in_code = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.TextField()
    changed_at = models.DateTimeField(auto_now=True)
    changed_by = models.TextField()

    class Meta:
        db_table = "dl_schedules"
        permissions = [("run_schedule", "Can run a schedule now")]
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(cron__isnull=True) ^ Q(interval_sec__isnull=True), name="dl_schedules_cron_xor_interval"
            ),
            models.CheckConstraint(condition=Q(interval_sec__gte=1), name="dl_schedules_interval_positive"),
            models.CheckConstraint(condition=Q(catch_up_max__gte=1), name="dl_schedules_catch_up_max_positive"),
        ]
        indexes = [
            # The enqueue's scan: due schedules that are not paused.
            models.Index(fields=["next_run_at"], condition=Q(paused=False), name="ix_dl_schedules_due"),
        ]

    def __str__(self) -> str:
        return self.name
