"""The /pipeline pages' words for a run and its items (``{% load run_page %}``): how long a run
took, to the second, and why an item is where it is."""

from django import template
from django.utils import timezone

from ingestion.models import IngestionItem, IngestionRun, ItemStatus
from pipeline_project.web.times import duration

register = template.Library()


@register.filter
def took(run: IngestionRun) -> str:
    """ "12.4 s", "3 min 5 s"; "running for 40 s" while it runs; "–" before it starts."""
    if run.started_at is None:
        return "–"
    if run.finished_at is None:
        return f"running for {duration(timezone.now() - run.started_at)}"
    return duration(run.finished_at - run.started_at)


@register.filter
def why(item: IngestionItem) -> str:
    """Why a failed, skipped or reviewed item is so: its error, its skip's reason, what to review."""
    if item.status == ItemStatus.FAILED:
        return item.last_error_message or item.error_message or ""
    if item.status == ItemStatus.SKIPPED:
        return item.ingest_reason or item.review_reason or ""
    if item.status == ItemStatus.REVIEW_REQUIRED or item.needs_review:
        return item.review_reason or ""
    return ""
