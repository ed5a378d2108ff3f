"""State changes of durable processes, by caller: what clients ask for (``clients``: init, call,
repair, simple repair, put), the worker protocol (``protocol``: claim tasks, record their ends)
and housekeeping (``maintenance``: the tasks of workers that died). What they take from outside
(a processor's answer, an imported process) is parsed in ``parsing``.

Callers import the names from here: ``from jobs.processes import services; services.process_call(...)``.
"""

from jobs.processes.services.clients import (
    ProcessorError,
    TaskRequest,
    process_call,
    process_init,
    process_init_prepare,
    process_put,
    process_repair,
    process_simple_repair,
    process_task_prepare,
    task_result,
)
from jobs.processes.services.maintenance import processes_delete, zombies_collect
from jobs.processes.services.parsing import Result, result_parse
from jobs.processes.services.protocol import (
    NOTIFIED_OUTCOME_MAX_BYTES,
    ClaimedTask,
    completion_type,
    is_running_race,
    task_complete,
    task_remove_process,
    tasks_claim,
    tasks_succeed,
)
from jobs.processes.types import PreparedTask, StepTimeoutError

__all__ = [
    "NOTIFIED_OUTCOME_MAX_BYTES",
    "ClaimedTask",
    "PreparedTask",
    "ProcessorError",
    "Result",
    "StepTimeoutError",
    "TaskRequest",
    "completion_type",
    "is_running_race",
    "process_call",
    "process_init",
    "process_init_prepare",
    "process_put",
    "process_repair",
    "process_simple_repair",
    "process_task_prepare",
    "processes_delete",
    "result_parse",
    "task_complete",
    "task_remove_process",
    "task_result",
    "tasks_claim",
    "tasks_succeed",
    "zombies_collect",
]
