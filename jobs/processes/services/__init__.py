"""State changes of durable processes, in three parts: what clients ask for (``clients``),
importing a process (``put``) and what workers do with tasks (``workers``).

Callers import the names from here: ``from jobs.processes import services; services.process_call(...)``.
"""

from jobs.processes.selectors import PreparedTask, StepTimeoutError
from jobs.processes.services.clients import (
    ProcessorError,
    TaskRequest,
    process_call,
    process_init,
    process_init_prepare,
    process_repair,
    process_simple_repair,
    process_task_prepare,
    task_result,
)
from jobs.processes.services.put import process_put
from jobs.processes.services.workers import (
    NOTIFIED_OUTCOME_MAX_BYTES,
    ClaimedTask,
    Result,
    is_running_race,
    result_parse,
    task_complete,
    task_remove_process,
    tasks_claim,
    zombies_collect,
)

__all__ = [
    "NOTIFIED_OUTCOME_MAX_BYTES",
    "ClaimedTask",
    "PreparedTask",
    "ProcessorError",
    "Result",
    "StepTimeoutError",
    "TaskRequest",
    "is_running_race",
    "process_call",
    "process_init",
    "process_init_prepare",
    "process_put",
    "process_repair",
    "process_simple_repair",
    "process_task_prepare",
    "result_parse",
    "task_complete",
    "task_remove_process",
    "task_result",
    "tasks_claim",
    "zombies_collect",
]
