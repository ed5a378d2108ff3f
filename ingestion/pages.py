"""The /pipeline pages: runs of the sources, each run's steps and problems, Run, Retry failed
and Cancel. Server-rendered in the admin's frame; while a run is active a page refreshes its
body (with the page's own query: its filters and page). Each page is read and rendered in one
snapshot, so what it shows is one state of the database."""

import json
import uuid

from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ingestion import selectors, services
from ingestion.models import ENDED_RUN_STATUSES, IngestionRun, ItemStatus, Source
from ingestion.services.runs import LIVE_ITEM_STATUSES
from pipeline_project.api.errors import ApplicationError, NotFoundError
from pipeline_project.audit.actions import may, permissions_of
from pipeline_project.audit.selectors import audit_entries_for
from pipeline_project.audit.services import audited_call
from pipeline_project.db.snapshot import snapshot
from pipeline_project.web.query import query_int

HISTORY_PAGE_SIZE = 25


def _require_view(request) -> None:
    if not request.user.has_perm("ingestion.view_ingestionrun"):
        raise PermissionDenied


def _require(request, action: str) -> None:
    if not may(request.user, action):
        raise PermissionDenied


def _context(request, title: str, **extra) -> dict:
    return {
        **admin.site.each_context(request),
        "title": title,
        "opts": IngestionRun._meta,
        "can": permissions_of(request.user),
        **extra,
    }


def _rendered(request, template: str, context: dict) -> TemplateResponse:
    """The page, or its refreshed body (``?fragment=1``), rendered now: inside the snapshot."""
    if request.GET.get("fragment"):
        template = template.replace(".html", "_body.html")
    return TemplateResponse(request, template, context).render()


@staff_member_required
@require_GET
@snapshot()
def runs_page(request):
    _require_view(request)
    source_id = query_int(request.GET.get("source"))
    status = request.GET.get("status") if request.GET.get("status") in ENDED_RUN_STATUSES else None
    history = Paginator(selectors.runs_history(source_id=source_id, status=status), HISTORY_PAGE_SIZE)
    active = list(selectors.runs_active())
    context = _context(
        request,
        "Pipeline runs",
        sources=Source.objects.order_by("name"),
        active_runs=active,
        active=bool(active),
        history=history.get_page(request.GET.get("page")),
        source_filter=source_id,
        status_filter=status,
        ended_statuses=ENDED_RUN_STATUSES,
    )
    return _rendered(request, "ingestion/runs.html", context)


@staff_member_required
@require_GET
@snapshot()
def run_page(request, run_id: uuid.UUID):
    _require_view(request)
    try:
        run = selectors.run_get(run_id=run_id)
    except NotFoundError:
        raise Http404("no such run") from None
    counts = selectors.run_stage_counts(run=run)
    problems = list(selectors.run_problems(run=run))
    context = _context(
        request,
        f"Run {str(run.id)[:8]} of {run.source.name}",
        run=run,
        cards=selectors.run_stage_cards(counts=counts),
        active=run.status not in ENDED_RUN_STATUSES,
        lists=selectors.run_stage_items(run=run, counts=counts),
        problems=problems,
        problems_total=max(selectors.run_items_in(counts=counts, statuses=selectors.PROBLEM_STATUSES), len(problems)),
        timeline=selectors.run_timeline(counts=counts),
        jobs=selectors.run_jobs_summary(run=run),
        jobs_search=json.dumps({"run_id": str(run.id)}),
        failed_items=selectors.run_items_in(counts=counts, statuses=[ItemStatus.FAILED]),
        unfinished_items=selectors.run_items_in(counts=counts, statuses=LIVE_ITEM_STATUSES),
        audit_entries=audit_entries_for(object_type="run", object_id=run.id),
    )
    return _rendered(request, "ingestion/run.html", context)


def run_started(request, *, source_id: int) -> IngestionRun:
    """Run the source, as the operator action ``run.start``: its entry names the run it started
    (the run's page shows it), its detail the source."""
    return audited_call(
        lambda: services.run_start(source_id=source_id),
        request=request,
        action="run.start",
        objects_of=lambda run: [run.id],
        detail=lambda run: {"source": run.source.name, "source_id": run.source_id},
    )


@staff_member_required
@require_POST
def source_run(request, source_id: int):
    _require(request, "run.start")
    try:
        run = run_started(request, source_id=source_id)
    except NotFoundError:
        raise Http404("no such source") from None
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("ingestion-runs")
    messages.success(request, f"Run of {run.source.name} started.")
    return redirect("ingestion-run", run_id=run.id)


@staff_member_required
@require_POST
def run_action(request, run_id: uuid.UUID, action: str):
    audited_as = {"cancel": "run.cancel", "retry": "run.retry_failed"}.get(action)
    if audited_as is None:
        raise Http404("no such action")
    _require(request, audited_as)
    by = request.user.get_username()
    try:
        if action == "cancel":
            audited_call(
                lambda: services.run_cancel(run_id=run_id, by=by), request=request, action=audited_as, objects=[run_id]
            )
            messages.success(request, "Run canceled; its running jobs were asked to stop.")
        else:
            retried = audited_call(
                lambda: services.run_retry_failed(run_id=run_id, by=by),
                request=request,
                action=audited_as,
                objects=[run_id],
                count=int,
            )
            messages.success(request, f"{retried} failed job(s) queued again.")
    except NotFoundError:
        raise Http404("no such run") from None
    except ApplicationError as error:
        messages.error(request, error.message)
    return redirect(reverse("ingestion-run", kwargs={"run_id": run_id}))
