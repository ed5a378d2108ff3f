from ingestion import services
from ingestion.models import IngestionRun, Source


def new_run(name: str = "gov") -> IngestionRun:
    source, _created = Source.objects.get_or_create(name=name, defaults={"start_url": "http://127.0.0.1/"})
    return services.run_create(source_id=source.id)


def item(run: IngestionRun, **fields) -> dict:
    """A discovery item of ``run`` (status completed), with ``fields`` over it."""
    return {
        "run_id": str(run.id),
        "source_id": run.source_id,
        "stage": "discovery",
        "item_type": "source_url",
        "status": "completed",
        "source_url_id": "1",
        **fields,
    }
