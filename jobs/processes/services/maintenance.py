"""Housekeeping of processes: the tasks of workers that died (``zombies_collect``), a namespace's
processes taken away (``processes_delete``)."""

from django.db import transaction
from django.utils import timezone

from jobs.processes.models import Process, Task
from jobs.processes.services._common import cancel_scheduled, notify_task_done, set_status
from pipeline_project.db import sql


def zombies_collect(*, namespace: str, margin_sec: float) -> int:
    """Tasks of ``namespace`` still running ``margin_sec`` after their deadline (the claim's
    time plus the step timeout, on the row: the namespace's processor need not be known here;
    their worker died): each process goes to ``error`` (``zombie detected``), its task errs,
    its other tasks are cancelled."""
    with transaction.atomic():
        rows = sql.rows(
            """
            DELETE FROM dl_proc_running
            WHERE namespace = %(namespace)s AND deadline < now() - make_interval(secs => %(margin)s)
            RETURNING process_pk, task_id
            """,
            {"namespace": namespace, "margin": margin_sec},
        )
        for process_pk, task_id in rows:
            process = Process.objects.select_for_update().get(id=process_pk)
            set_status(process, "error")
            process.detail = "zombie detected"
            process.corrupted_by = task_id
            process.save()
            cancel_scheduled(process)
            Task.objects.filter(task_id=task_id).update(status="error", finished_time=timezone.now())
            notify_task_done(task_id)
    return len(rows)


def processes_delete(*, namespace: str) -> int:
    """Delete every process of ``namespace`` with its tasks, schedule, running rows and events
    (they cascade); how many processes were deleted."""
    with transaction.atomic():
        processes = Process.objects.filter(namespace=namespace)
        count = processes.count()
        processes.delete()
    return count
