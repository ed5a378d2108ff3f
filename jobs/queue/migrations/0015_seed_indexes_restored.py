from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models

import jobs.queue.models


class Migration(migrations.Migration):
    # The seed's two indexes as the seed writes them again (0012 and 0013 had narrowed them under the
    # seed's names), after the claim's running-key probe got an index of its own that they cannot
    # serve. Built CONCURRENTLY, each before the narrowed one it replaces is dropped (renamed out of
    # its way first): on a table of millions of jobs, the queue keeps running and keeps its indexes.
    atomic = False

    dependencies = [
        ("jobs", "0014_operator_permissions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["lock_key"],
                condition=models.Q(jobs.queue.models.NotDistinctFrom(models.F("status"), models.Value("running"))),
                name="ix_dl_jobs_running_lock_key",
            ),
        ),
        migrations.RenameIndex(
            model_name="job", old_name="ix_dl_jobs_status_queue", new_name="ix_dl_jobs_status_queue_0012"
        ),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(fields=["status", "queue"], name="ix_dl_jobs_status_queue"),
        ),
        RemoveIndexConcurrently(model_name="job", name="ix_dl_jobs_status_queue_0012"),
        migrations.RenameIndex(
            model_name="job", old_name="ix_dl_jobs_running_lease", new_name="ix_dl_jobs_running_lease_0013"
        ),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["lease_expires_at"], condition=models.Q(status="running"), name="ix_dl_jobs_running_lease"
            ),
        ),
        RemoveIndexConcurrently(model_name="job", name="ix_dl_jobs_running_lease_0013"),
    ]
