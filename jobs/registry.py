"""The ``@task`` API's documented path before it moved to :mod:`jobs.handlers`; kept so that
handler modules written against it keep working. New code imports ``jobs.handlers``."""

from jobs.handlers import FatalError, JobCancelled, JobContext, LeaseLost, TaskHandler, TaskSchedule, registry, task

__all__ = ["FatalError", "JobCancelled", "JobContext", "LeaseLost", "TaskHandler", "TaskSchedule", "registry", "task"]
