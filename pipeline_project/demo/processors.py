"""The demo's process namespace: orders that move through their stages on timers.

``demo-order-1`` moves a stage every 10 s until it is delivered; ``demo-order-2`` is a slow one
(a stage every 30 s, so its timer is always due within the hour); ``demo-order-broken``'s init
fails, leaving a process in ``error`` for the admin's repair actions.
"""

from jobs.processes.namespaces import RetryPolicy, namespace
from pipeline_project.demo.config import NAMESPACE

STAGES = ("received", "packed", "shipped", "delivered")


@namespace(NAMESPACE, retry_policy=RetryPolicy(initial_timeout=2, max_attempts=3), process_step_timeout=30)
def demo_order(task_type, args, process):
    if task_type == "init":
        if (args or {}).get("fail"):
            return {"error": "the demo's broken order: its init fails on purpose (repair it)"}
        every = int((args or {}).get("every_sec", 10))
        aux = {"stage": STAGES[0], "every_sec": every, "ticks": 0}
        return {"events": [{"order": args, "stage": STAGES[0]}], "aux_state": aux, "action": {"set_timer": every}}
    aux = dict(process.aux_state or {})
    if task_type == "timeout":
        aux["ticks"] = aux.get("ticks", 0) + 1
        position = STAGES.index(aux.get("stage", STAGES[0]))
        aux["stage"] = STAGES[min(position + 1, len(STAGES) - 1)]
        if aux["stage"] == STAGES[-1]:
            return {"events": [{"stage": aux["stage"]}], "aux_state": aux, "action": "unset_timer"}
        return {"events": [{"stage": aux["stage"]}], "aux_state": aux, "action": {"set_timer": aux["every_sec"]}}
    if task_type == "repair":
        return {"events": [{"repaired": True}], "aux_state": {"stage": STAGES[0], "every_sec": 10, "ticks": 0}}
    return {"response": {"stage": aux.get("stage"), "ticks": aux.get("ticks", 0)}}  # a call: where it is
