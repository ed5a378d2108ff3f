"""What the processes' services, waiters and views hand each other about a client's task."""

from dataclasses import dataclass
from typing import Any

from pipeline_project.api.errors import ApplicationError


class StepTimeoutError(ApplicationError):
    status = 504
    code = "timeout"


@dataclass(frozen=True)
class TaskOutcome:
    """How a client's task stands: its status and response, and its process's status."""

    status: str
    response: Any
    process_status: str


@dataclass(frozen=True)
class PreparedTask:
    """A client's task in the schedule: wait for its end for up to ``timeout`` seconds."""

    task_id: int
    timeout: float
