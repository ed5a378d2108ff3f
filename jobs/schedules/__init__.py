"""Recurring schedules: a task with fixed args enqueued on a cron expression or a fixed interval."""
