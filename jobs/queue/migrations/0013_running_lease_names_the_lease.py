from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built CONCURRENTLY: on a table of millions of jobs, the queue keeps running meanwhile.
    atomic = False

    dependencies = [
        ("jobs", "0012_status_queue_without_live_jobs"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="job", name="ix_dl_jobs_running_lease"),
        AddIndexConcurrently(
            model_name="job",
            index=models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(status="running", lease_expires_at__isnull=False),
                name="ix_dl_jobs_running_lease",
            ),
        ),
    ]
