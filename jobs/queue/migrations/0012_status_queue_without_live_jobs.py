from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built CONCURRENTLY: on a table of millions of jobs, the queue keeps running meanwhile.
    atomic = False

    dependencies = [
        ("jobs", "0011_no_vacuum_truncate"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="job", name="ix_dl_jobs_status_queue"),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["status", "queue"],
                condition=~models.Q(status__in=["queued", "running"]),
                name="ix_dl_jobs_status_queue",
            ),
        ),
    ]
