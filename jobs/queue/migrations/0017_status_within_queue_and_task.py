from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # A queue's or a task's jobs of one status (states.LISTED_APART), newest first. Built
    # CONCURRENTLY: on a table of millions of jobs the queue keeps running meanwhile.
    atomic = False

    dependencies = [
        ("jobs", "0016_finished_jobs_throughput"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status__in", ("queued", "failed", "canceled", "lost"))),
                fields=[column, "status", "job_id"],
                name=f"ix_dl_jobs_{column}_status_job",
            ),
        )
        for column in ("queue", "task")
    ]
