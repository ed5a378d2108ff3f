"""The processors bench/processes.py drives (runworker loads them with --processors)."""

from datetime import datetime

from django.utils import timezone

from jobs.processes.namespaces import namespace


@namespace("bench.echo", concurrency=16)
def echo(task_type, args, process):
    """A call answers its args back and records one event."""
    return {"events": [args], "response": args}


@namespace("bench.timer", concurrency=16, history_range={"limit": 0})
def timer(task_type, args, process):
    """The timeout records how late it fired (the process was imported with its due time)."""
    late = (timezone.now() - datetime.fromisoformat(process.aux_state["due"])).total_seconds() * 1000
    return {"events": [{"late_ms": late}]}
