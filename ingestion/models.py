"""Ingestion runs and their items (seed 004): one run per click of Run for one source, and the
current state of each item of the run (a state table, upserted by ``(run_id, item_key)``)."""

import operator
import uuid
from functools import reduce

import pgtrigger
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Now

from ingestion.stats import RUN_TOUCH_SQL, empty_stats, items_trigger_sql
from pipeline_project.db.constraints import one_of


class RunStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


ACTIVE_RUN_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)
ENDED_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED)


class RunStage(models.TextChoices):
    DISCOVERY = "discovery"
    DOCUMENTS = "documents"
    OCR = "ocr"
    SUMMARY = "summary"


class ItemStage(models.TextChoices):
    DISCOVERY = "discovery"
    DOCUMENTS = "documents"
    OCR = "ocr"


class ItemType(models.TextChoices):
    SOURCE_URL = "source_url"
    DOCUMENT = "document"
    OCR_JOB = "ocr_job"


# Each stage's items (sections 6.1–6.3 and 11).
ITEM_TYPE_OF_STAGE = {
    ItemStage.DISCOVERY: ItemType.SOURCE_URL,
    ItemStage.DOCUMENTS: ItemType.DOCUMENT,
    ItemStage.OCR: ItemType.OCR_JOB,
}


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    SKIPPED = "skipped"
    REVIEW_REQUIRED = "review_required"


def default_crawl_delay_sec() -> float:
    return settings.INGESTION_CRAWL_DELAY_SEC


def default_max_concurrent_per_host() -> int:
    return settings.INGESTION_MAX_CONCURRENT_PER_HOST


class Source(models.Model):
    """Where a run starts: a page whose links to documents are followed, within limits, politely."""

    name = models.CharField(max_length=200, unique=True)
    start_url = models.URLField(max_length=2000)
    enabled = models.BooleanField(default=True)
    allowed_hosts = models.JSONField(
        default=list, blank=True, help_text="Hosts links may lead to; empty: the start URL's host"
    )
    max_documents = models.PositiveIntegerField(default=100)
    max_bytes = models.PositiveBigIntegerField(default=20 * 1024 * 1024, help_text="Largest page or file fetched")
    obey_robots_txt = models.BooleanField(
        "obey robots.txt", default=True, help_text="Fetch nothing the hosts' robots.txt disallows for our User-Agent"
    )
    max_concurrent_per_host = models.PositiveSmallIntegerField(
        default=default_max_concurrent_per_host,
        validators=[MinValueValidator(1), MaxValueValidator(64)],
        help_text="At most this many fetches of this source run at once against one host (across all workers)",
    )
    crawl_delay_sec = models.FloatField(
        "crawl delay (seconds)",
        default=default_crawl_delay_sec,
        validators=[MinValueValidator(0), MaxValueValidator(3600)],
        help_text="Time between the starts of two requests of this source (a longer robots.txt Crawl-delay wins)",
    )
    created_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "ingestion_sources"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(max_concurrent_per_host__gte=1), name="ingestion_sources_concurrency_valid"
            ),
            models.CheckConstraint(condition=models.Q(crawl_delay_sec__gte=0), name="ingestion_sources_delay_valid"),
        ]

    def __str__(self) -> str:
        return self.name


class IngestionRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, db_column="source_id", related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus, default=RunStatus.PENDING)
    active_stage = models.CharField(max_length=16, choices=RunStage, null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    stats_json = models.JSONField(default=empty_stats, blank=True)
    manual = models.BooleanField(default=False)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(db_default=Now(), editable=False)

    class Meta:
        db_table = "ingestion_runs"
        permissions = [("cancel_ingestionrun", "Can cancel ingestion runs")]
        verbose_name = "ingestion run"
        constraints = [
            one_of("status", RunStatus, "ingestion_runs"),
            one_of("active_stage", RunStage, "ingestion_runs", null=True),
        ]
        indexes = [models.Index(fields=["status", "-created_at"], name="ix_ingestion_runs_status")]
        # One place sets updated_at, whoever writes the run (a service, the stats trigger, a client's PATCH).
        triggers = [
            pgtrigger.Trigger(
                name="run_touch",
                level=pgtrigger.Row,
                when=pgtrigger.Before,
                operation=pgtrigger.Insert | pgtrigger.Update,
                func=RUN_TOUCH_SQL,
            )
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.id}"


# An item whose type is its stage's (a discovered URL in discovery, ...), and one the error panels show.
TYPE_MATCHES_STAGE = reduce(
    operator.or_, (models.Q(stage=stage, item_type=item_type) for stage, item_type in ITEM_TYPE_OF_STAGE.items())
)
IS_PROBLEM = models.Q(status__in=(ItemStatus.FAILED, ItemStatus.REVIEW_REQUIRED)) | models.Q(needs_review=True)


class IngestionItem(models.Model):
    id = models.BigAutoField(primary_key=True)
    # Indexed with the id (ix_ingestion_items_run_id, _source_id): the API lists by either in id order.
    run = models.ForeignKey(
        IngestionRun, on_delete=models.CASCADE, db_column="run_id", related_name="items", db_index=False
    )
    source = models.ForeignKey(
        Source, on_delete=models.PROTECT, db_column="source_id", related_name="+", db_index=False
    )
    source_url_id = models.TextField(null=True, blank=True)
    document_id = models.TextField(null=True, blank=True)
    item_key = models.TextField()
    item_label = models.TextField(null=True, blank=True)
    stage = models.CharField(max_length=16, choices=ItemStage)
    item_type = models.CharField(max_length=16, choices=ItemType)
    status = models.CharField(max_length=16, choices=ItemStatus)
    ingest_status = models.CharField(max_length=16, choices=ItemStatus, null=True, blank=True)
    ingest_reason = models.TextField(null=True, blank=True)
    job_id = models.UUIDField(null=True, blank=True)
    document_url = models.TextField(null=True, blank=True)
    filename = models.TextField(null=True, blank=True)
    file_checksum = models.TextField(null=True, blank=True)
    file_kind = models.TextField(null=True, blank=True)
    error_message = models.TextField(null=True, blank=True)
    last_error_message = models.TextField(null=True, blank=True)
    needs_review = models.BooleanField(null=True, blank=True)
    review_reason = models.TextField(null=True, blank=True)
    context_json = models.JSONField(default=dict, db_default=models.Value({}, models.JSONField()), blank=True)
    payload_json = models.JSONField(null=True, blank=True)
    first_seen_at = models.DateTimeField(db_default=Now())
    last_seen_at = models.DateTimeField(db_default=Now())
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "ingestion_items"
        verbose_name = "ingestion item"
        constraints = [
            models.UniqueConstraint(fields=["run", "item_key"], name="ingestion_items_run_id_item_key_key"),
            one_of("stage", ItemStage, "ingestion_items"),
            one_of("item_type", ItemType, "ingestion_items"),
            one_of("status", ItemStatus, "ingestion_items"),
            one_of("ingest_status", ItemStatus, "ingestion_items", null=True),
        ]
        indexes = [
            models.Index(fields=["run", "stage", "status"], name="ix_ingestion_items_run_stage"),
            models.Index(fields=["job_id"], name="ix_ingestion_items_job", condition=models.Q(job_id__isnull=False)),
            # A run page's lists, each stage's first items, at a run of 100,000 (its counts are
            # ingestion_run_counts): by stage, and those listed by their type in another stage
            # (section 11), which are few; its error panel: the failed and those to review.
            models.Index(fields=["run", "stage", "id"], name="ix_ingestion_items_run_list"),
            models.Index(
                fields=["run", "item_type", "id"], condition=~TYPE_MATCHES_STAGE, name="ix_ingestion_items_other"
            ),
            models.Index(fields=["run", "stage", "id"], condition=IS_PROBLEM, name="ix_ingestion_items_problems"),
            # The API's items of a run or of a source, in id order, a page at a time.
            models.Index(fields=["run", "id"], name="ix_ingestion_items_run_id"),
            models.Index(fields=["source", "id"], name="ix_ingestion_items_source_id"),
        ]
        # Per statement: no live item in a canceled run; stats_json of the run kept current from the rows changed.
        triggers = [
            pgtrigger.Composer(
                name=f"run_stats_{operation.name.lower()}",
                level=pgtrigger.Statement,
                when=pgtrigger.After,
                operation=operation,
                func=items_trigger_sql(operation.name),
                declare=[("canceled_run", "uuid")],
            )
            for operation in (pgtrigger.Insert, pgtrigger.Update, pgtrigger.Delete)
        ]

    def __str__(self) -> str:
        return self.item_key


class RunStageCount(models.Model):
    """How many items of a run are in each stage and status (what stats_json is built from,
    so that no change recounts a run's items)."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(
        IngestionRun, on_delete=models.CASCADE, db_column="run_id", related_name="+", db_constraint=False
    )
    stage = models.CharField(max_length=16, choices=ItemStage)
    status = models.CharField(max_length=16, choices=ItemStatus)
    items = models.IntegerField(default=0)
    first_at = models.DateTimeField(db_default=Now())  # when the first item came to this stage and status
    changed_at = models.DateTimeField(db_default=Now())  # when the count last changed

    class Meta:
        db_table = "ingestion_run_counts"
        constraints = [models.UniqueConstraint(fields=["run", "stage", "status"], name="uq_ingestion_run_counts")]


class HostSlot(models.Model):
    """One of the fetches a host may serve at once: a fetch holds a slot (``holder``) while it
    runs, across every worker process; a holder that died lets it go at ``expires_at``."""

    id = models.BigAutoField(primary_key=True)
    host = models.TextField()  # host[:port], as ingestion.keys.normalize_url writes it
    slot = models.PositiveSmallIntegerField()
    holder = models.TextField(null=True)
    expires_at = models.DateTimeField(null=True)

    class Meta:
        db_table = "ingestion_host_slots"
        constraints = [models.UniqueConstraint(fields=["host", "slot"], name="uq_ingestion_host_slots")]


class SourcePace(models.Model):
    """When a source's next request may start: each request reserves its start time here, one
    crawl delay after the previous reservation."""

    source = models.OneToOneField(
        Source, on_delete=models.CASCADE, primary_key=True, db_column="source_id", related_name="+"
    )
    next_request_at = models.DateTimeField()

    class Meta:
        db_table = "ingestion_source_pace"


class RobotsTxt(models.Model):
    """A host's robots.txt as last fetched (shared by every worker until ``expires_at``)."""

    origin = models.TextField(primary_key=True)  # scheme://host[:port]
    status_code = models.IntegerField(null=True)  # None: the host could not be reached
    body = models.TextField(blank=True, default="")
    fetched_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "ingestion_robots_txt"
        verbose_name = "robots.txt"
        verbose_name_plural = "robots.txt files"

    def __str__(self) -> str:
        return f"{self.origin}/robots.txt"
