"""Sources made and taken away whole: by name, with their runs, items, jobs and files (what a
setup such as ``manage.py demo`` needs)."""

import shutil
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction

from ingestion.models import ENDED_RUN_STATUSES, HostSlot, IngestionRun, RobotsTxt, Source, SourcePace
from ingestion.services.runs import run_cancel, run_start
from jobs.queue.selectors import jobs_with_args
from jobs.queue.services import Selection, jobs_delete


def source_ensure(*, name: str, start_url: str, first_run: bool = False, **defaults) -> tuple[bool, bool]:
    """The source named ``name``, made with ``defaults`` if it is missing, its start URL moved to
    ``start_url`` if it changed; with ``first_run``, a run of it started if it never ran. Whether
    the source and whether a run were made."""
    with transaction.atomic():
        source, created = Source.objects.get_or_create(name=name, defaults={"start_url": start_url, **defaults})
        if source.start_url != start_url:
            Source.objects.filter(id=source.id).update(start_url=start_url)
        if not first_run or IngestionRun.objects.filter(source=source).exists():
            return created, False
        run_start(source_id=source.id, manual=False)
    return created, True


def source_delete(*, name: str, by: str) -> int:
    """Delete the source named ``name``, its runs (stopped first), their items, jobs and downloaded
    files, and what politeness kept for its host when no other source fetches from it; how many
    runs it had (0 when there is no such source)."""
    with transaction.atomic():
        source = Source.objects.filter(name=name).first()
        if source is None:
            return 0
        runs = list(IngestionRun.objects.filter(source=source).values_list("id", "status"))
        for run_id, status in runs:
            if status not in ENDED_RUN_STATUSES:
                run_cancel(run_id=run_id, by=by)
            jobs_delete(selection=Selection.of_queryset(jobs_with_args(values={"run_id": str(run_id)})), force=True)
        IngestionRun.objects.filter(source=source).delete()  # items and stage counts go with them
        SourcePace.objects.filter(source=source).delete()
        origin = f"{urlsplit(source.start_url).scheme}://{urlsplit(source.start_url).netloc}"
        source.delete()
        if not any(s.start_url.startswith(origin) for s in Source.objects.only("start_url")):
            RobotsTxt.objects.filter(origin=origin).delete()
            HostSlot.objects.filter(host=urlsplit(origin).netloc, holder__isnull=True).delete()
        paths = [settings.INGESTION_STORAGE_DIR / str(run_id) for run_id, _status in runs]
        transaction.on_commit(lambda: [shutil.rmtree(path, ignore_errors=True) for path in paths])
    return len(runs)
