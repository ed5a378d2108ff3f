import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built CONCURRENTLY: on a table of millions of items, the workers keep writing meanwhile.
    atomic = False

    dependencies = [
        ("ingestion", "0004_run_page_at_size"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='ingestionitem',
            index=models.Index(fields=['run', 'stage', 'id'], name='ix_ingestion_items_run_list'),
        ),
        AddIndexConcurrently(
            model_name='ingestionitem',
            index=models.Index(condition=models.Q(models.Q(('item_type', 'source_url'), ('stage', 'discovery')), models.Q(('item_type', 'document'), ('stage', 'documents')), models.Q(('item_type', 'ocr_job'), ('stage', 'ocr')), _connector='OR', _negated=True), fields=['run', 'item_type', 'id'], name='ix_ingestion_items_other'),
        ),
        AddIndexConcurrently(
            model_name='ingestionitem',
            index=models.Index(condition=models.Q(('status__in', ('failed', 'review_required')), ('needs_review', True), _connector='OR'), fields=['run', 'stage', 'id'], name='ix_ingestion_items_problems'),
        ),
        # The foreign keys' own indexes are the new ones' first columns: dropped once those exist.
        AddIndexConcurrently(
            model_name='ingestionitem',
            index=models.Index(fields=['run', 'id'], name='ix_ingestion_items_run_id'),
        ),
        AddIndexConcurrently(
            model_name='ingestionitem',
            index=models.Index(fields=['source', 'id'], name='ix_ingestion_items_source_id'),
        ),
        migrations.AlterField(
            model_name='ingestionitem',
            name='run',
            field=models.ForeignKey(db_column='run_id', db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='items', to='ingestion.ingestionrun'),
        ),
        migrations.AlterField(
            model_name='ingestionitem',
            name='source',
            field=models.ForeignKey(db_column='source_id', db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='ingestion.source'),
        ),
    ]
