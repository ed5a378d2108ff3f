from django.db import migrations

# The pipeline finds a run's jobs by args ->> 'run_id' (settling runs every second, cancel,
# the run page): an index on just the jobs that carry a run_id.
INDEX = "ix_dl_jobs_ingestion_run"


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0001_initial"), ("jobs", "0001_initial")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON dl_jobs ((args ->> 'run_id'), status) WHERE args ? 'run_id'",
            f"DROP INDEX IF EXISTS {INDEX}",
        )
    ]
