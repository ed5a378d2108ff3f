from django.db import migrations

from pipeline_project.db.storage import vacuum_truncate_off


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0010_list_indexes"),
    ]

    operations = [vacuum_truncate_off("dl_jobs", "dl_job_events", "dl_job_counts")]
