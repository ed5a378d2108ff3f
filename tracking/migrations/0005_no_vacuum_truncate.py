from django.db import migrations

from pipeline_project.db.storage import vacuum_truncate_off


class Migration(migrations.Migration):
    dependencies = [
        ("tracking", "0004_status_indexes"),
    ]

    operations = [vacuum_truncate_off("pipeline_tracking_counts")]
