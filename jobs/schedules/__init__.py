"""Recurring schedules: a task with fixed args enqueued on a cron expression or a fixed interval.

A plugin of the queue: its periodic task (``worker``) enqueues the ticks that are due through the
queue's ``services``; its own models keep each schedule and its last tick.

May import: the shared layers, the audit trail's services, the runtime's registry, and the
queue's ``services``, ``selectors`` and ``handlers``.
"""
