"""A prepare job's files follow its row: whatever deletes the row (the API, the admin, retention,
a forced deletion of a running job, a queryset anywhere), its directory, runtime and servers go
once that deletion commits. ``executor.job_dirs_sweep`` removes those a crash left between the
two."""

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from jobs.dbstates.engine import executor
from jobs.dbstates.models import PrepareJob


@receiver(post_delete, sender=PrepareJob, dispatch_uid="dbstates.job_files_follow_row")
def job_files_follow_row(sender, instance: PrepareJob, using: str, **kwargs) -> None:
    job_id = instance.job_id
    transaction.on_commit(lambda: executor.job_files_remove(job_id), using=using, robust=True)
