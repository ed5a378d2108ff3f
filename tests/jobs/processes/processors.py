"""Processors for the processes tests; runworker subprocesses load them with --processors."""

import threading
import time
from collections import Counter

from jobs.processes.namespaces import RetryPolicy, namespace

RETRIES = RetryPolicy(initial_timeout=0.1, backoff_coefficient=2.0, max_attempts=3, non_retryable_errors=("fatal",))
running = Counter()  # tasks running now per process id (to see that none overlap)
overlaps: list[str] = []
_lock = threading.Lock()


def run_script(task_type, args, process, context=None):
    """Does what the task's script says: init/call/repair scripts are their args; a timeout
    takes the next script from aux_state["on_timeout"] (a list), whose rest it keeps.

    Script keys: events, action, response, aux_state, metadata (returned as they are), sleep
    (seconds to take), error (returned as the error), raise (raised), observe (answer what the
    processor got, see ``observed``, and keep it in aux_state["observed"]).
    """
    with _lock:
        running[process.process_id] += 1
        if running[process.process_id] > 1:
            overlaps.append(process.process_id)
    try:
        if task_type == "timeout":
            queue = list((process.aux_state or {}).get("on_timeout", []))
            script = queue.pop(0) if queue else {}
            script = {"aux_state": {**(process.aux_state or {}), "on_timeout": queue}, **script}
        else:
            script = dict(args or {})
        if script.pop("observe", False):
            seen = observed(task_type, process, context)
            script["aux_state"] = {**script.get("aux_state", process.aux_state or {}), "observed": seen}
            script.setdefault("response", seen)
        time.sleep(script.pop("sleep", 0))
        if "raise" in script:
            raise RuntimeError(script["raise"])
        if "error" in script:
            return {"error": script["error"]}
        if task_type == "repair" and "response" not in script:
            script["response"] = {"repaired": True}
        return script
    finally:
        with _lock:
            running[process.process_id] -= 1


def observed(task_type, process, context) -> dict:
    """What a processor got: the task type, the ids of the history's events in their order,
    the range they were read in, and the context."""
    return {
        "task_type": task_type,
        "history": [event["event_id"] for event in process.history],
        "range": process.range,
        "context": context,
    }


namespace("test.scripted", retry_policy=RETRIES, process_step_timeout=5.0)(run_script)
namespace("test.quick", retry_policy=RETRIES, process_step_timeout=0.5)(run_script)
# A namespace whose processors get the last two events unless a task names its own range.
namespace("test.ranged", process_step_timeout=5.0, history_range={"direction": "backward", "limit": 2})(run_script)


def raise_hostile(task_type, args, process):
    """Raises what an exception may carry: a NUL, a lone surrogate and a password."""
    raise RuntimeError("bad \x00 byte, lone \ud800 surrogate, postgres://app:hunter2@db/x")


namespace("test.hostile", process_step_timeout=5.0)(raise_hostile)
