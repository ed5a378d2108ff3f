from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built CONCURRENTLY: on a table of millions of rows, the daemons keep writing meanwhile.
    atomic = False

    dependencies = [
        ("tracking", "0003_tracking_counts"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='pipelinetracking',
            index=models.Index(condition=models.Q(('event_ingest_status', 'done'), _negated=True), fields=['event_ingest_status', 'id'], name='ix_trk_not_done_event_ingest'),
        ),
        AddIndexConcurrently(
            model_name='pipelinetracking',
            index=models.Index(condition=models.Q(('shard_splitter_status', 'done'), _negated=True), fields=['shard_splitter_status', 'id'], name='ix_trk_not_done_shard_splitter'),
        ),
        AddIndexConcurrently(
            model_name='pipelinetracking',
            index=models.Index(condition=models.Q(('shard_worker_status', 'done'), _negated=True), fields=['shard_worker_status', 'id'], name='ix_trk_not_done_shard_worker'),
        ),
        AddIndexConcurrently(
            model_name='pipelinetracking',
            index=models.Index(condition=models.Q(('mysql_sender_status', 'done'), _negated=True), fields=['mysql_sender_status', 'id'], name='ix_trk_not_done_mysql_sender'),
        ),
    ]
