from django.db import migrations

from pipeline_project.db.storage import vacuum_truncate_off


class Migration(migrations.Migration):
    dependencies = [
        ("processes", "0004_status_index"),
    ]

    operations = [vacuum_truncate_off("dl_processes", "dl_process_counts")]
