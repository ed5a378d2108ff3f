"""Deleting instances, states (as a tree) and prepare jobs: sqlrs's DeleteResult (seed 1.7, 2.4).

The whole tree is built and checked first (``deletion``), with its rows locked (so no prepare adds
a child or an instance meanwhile; a dry run reads one snapshot instead); only when no node is
blocked is anything removed: nothing is deleted partially. A row gone before it could be read is
a 404.
"""

from contextlib import contextmanager
from pathlib import Path

from django.db import transaction

from jobs.dbstates.deletion_tree import ACTIVE_TASKS, DeleteResult, Node, instance_node, lockable, state_tree
from jobs.dbstates.engine import postgres, statefs
from jobs.dbstates.models import Instance, PrepareJob, State
from jobs.queue.services import Selection, jobs_cancel, jobs_delete
from pipeline_project.api.errors import NotFoundError
from pipeline_project.db.snapshot import snapshot


@contextmanager
def _tree_reads(*, dry_run: bool):
    """A dry run reads one snapshot; a deletion locks what it reads, in one transaction, until
    it has removed it."""
    with snapshot() if dry_run else transaction.atomic():
        yield


def _one(queryset, *, lock: bool, what: str):
    """The row (locked for a deletion), or a 404: it may have gone since the request named it."""
    row = lockable(queryset, lock=lock).first()
    if row is None:
        raise NotFoundError(f"{what} not found", code="not_found")
    return row


def _finish(root: Node, *, dry_run: bool, remove) -> DeleteResult:
    if root.blocked:
        return DeleteResult(dry_run=dry_run, outcome="blocked", root=root)
    if dry_run:
        return DeleteResult(dry_run=True, outcome="would_delete", root=root)
    remove(root)
    return DeleteResult(dry_run=False, outcome="deleted", root=root)


def instance_delete(*, instance_id: str, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with _tree_reads(dry_run=dry_run):
        found = Instance.objects.filter(instance_id=instance_id)
        instance = _one(found, lock=not dry_run, what=f"instance {instance_id}")
        return _finish(instance_node(instance, force=force), dry_run=dry_run, remove=_tree_remove)


def state_delete(*, state_id: str, recurse: bool = False, force: bool = False, dry_run: bool = False) -> DeleteResult:
    with _tree_reads(dry_run=dry_run):
        state = _one(State.objects.filter(state_id=state_id), lock=not dry_run, what=f"state {state_id}")
        tree = state_tree(state, recurse=recurse, force=force, lock=not dry_run)
        return _finish(tree, dry_run=dry_run, remove=_tree_remove)


def _tree_remove(root: Node) -> None:
    """Stop the tree's servers, delete its rows (children first), then its files."""
    paths = []
    for node in root.walk():
        if node.kind == "instance":
            data_dir = Path(node.row.runtime_dir)
            server = postgres.running(data_dir)
            if server is not None and node.connections:
                postgres.terminate_sessions(server)
            postgres.stop(data_dir, immediate=True)
            paths += [data_dir, postgres.log_path(data_dir)]
        else:
            paths.append(statefs.state_dir(node.row.engine_version, node.id))
        node.row.delete()
    transaction.on_commit(lambda: [statefs.remove(path) for path in paths])


def prepare_job_delete(*, job_id: str, force: bool = False, dry_run: bool = False) -> DeleteResult:
    """A job's rows (its directory follows them: ``signals``). A queued or running job is blocked
    (active_tasks) unless ``force``, which cancels its queue job too."""
    with _tree_reads(dry_run=dry_run):
        job = _one(PrepareJob.objects.filter(job_id=job_id), lock=not dry_run, what=f"prepare job {job_id}")
        active = not job.is_terminal
        node = Node("job", job_id, blocked=ACTIVE_TASKS if active and not force else "", row=job)

        def remove(_node: Node) -> None:
            job.delete()
            if active and job.queue_job_id:
                jobs_cancel(selection=Selection.of_ids([job.queue_job_id]), by="sqlrs")

        return _finish(node, dry_run=dry_run, remove=remove)


def prepare_job_purge(*, job_id: str) -> None:
    """A prepare job with what it made: its instances, the states it built (children first; a
    state another job built too stays if that job's tree holds it), its rows and its queue job.
    Running work is stopped (``force``)."""
    with transaction.atomic():
        job = _one(PrepareJob.objects.filter(job_id=job_id), lock=True, what=f"prepare job {job_id}")
        for instance_id in Instance.objects.filter(job=job).values_list("instance_id", flat=True):
            instance_delete(instance_id=instance_id, force=True)
        built = [state for state in job.tasks.values_list("output_state_id", flat=True) if state]
        prepare_job_delete(job_id=job_id, force=True)
        for state_id in reversed(built):  # children first
            if State.objects.filter(state_id=state_id).exists():
                state_delete(state_id=state_id, recurse=True, force=True)
        if job.queue_job_id:
            jobs_delete(selection=Selection.of_ids([job.queue_job_id]), force=True)
