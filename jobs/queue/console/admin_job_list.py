"""The job list's parts: its state tabs with their counts (``job_states``), the state filter they
set, each row's state, attempts in its run and times (what a queued job waits for, what holds its
queue), and the list's body as a fragment for its live refresh."""

from functools import cached_property
from html import unescape

from django.contrib import admin
from django.utils import timezone
from django.utils.html import format_html, format_html_join, strip_tags

from jobs.queue.console.job_page import latest_runs, run_attempts
from jobs.queue.console.job_states import ALL, STATES, Count, state_counts, state_filter
from jobs.queue.console.job_waits import pending_upstream, queue_holds
from jobs.queue.states import AWAITING_RETRY, QUEUED_STATES, SCHEDULED, WAITING, JobStatus, shown_state
from pipeline_project.web.admin import KeysetChangeList
from pipeline_project.web.times import countdown_html, duration

STATE_VAR = "state"
FRAGMENT_VAR = "fragment"  # the live refresh's ask: the list's body only
BODY_TEMPLATE = "admin/jobs/job/list_body.html"


def cell(text, *, title: str | None = None):
    """A list cell's text, cut with an ellipsis at the column's width, all of it on hover."""
    return format_html('<span class="cell" title="{}">{}</span>', text if title is None else title, text)


class StateFilter(admin.SimpleListFilter):
    """The tabs' filter (``?state=``), drawn as the tabs above the list, not in the sidebar."""

    title = parameter_name = STATE_VAR
    template = "admin/jobs/job/state_filter.html"

    def lookups(self, request, model_admin):
        return [(state, state) for state in STATES]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset if value is None else state_filter(queryset, value)


class JobChangeList(KeysetChangeList):
    """The page's jobs, each with its state, its latest run from the journal (its wait and run
    times, its attempts in it) and, queued, what it waits for and what holds its queue."""

    def get_results(self, request):
        self.wanted = {name: request.GET.get(name) for name in ("queue", "task", STATE_VAR, "status__exact")}
        super().get_results(request)
        self.result_list = list(self.result_list)
        runs = latest_runs(self.result_list)
        now = timezone.now()
        for job in self.result_list:
            job.latest_run = runs.get(job.job_id)
            job.state = shown_state(job.status, job.available_at, job.attempt, now)
            job.attempts = run_attempts(job, job.latest_run)
        queued = [job for job in self.result_list if job.status == JobStatus.QUEUED]
        holds = queue_holds({job.queue for job in queued})
        pending = pending_upstream([job.job_id for job in queued if job.state == WAITING])
        for job in queued:
            job.holds, job.pending = holds[job.queue], pending.get(job.job_id, 0)

    @cached_property
    def state_counts(self) -> dict[str, Count]:
        return state_counts(queue=self.wanted["queue"], task=self.wanted["task"])

    def counted(self) -> int | None:
        """The jobs the filters match, if known without counting them (``keyset_count``)."""
        state, status = self.wanted[STATE_VAR], self.wanted["status__exact"]
        if state is None and status is not None:  # the status filter of older links
            return state_counts_of_status(self.state_counts, status)
        count = self.state_counts.get(state or ALL)
        return count.n if count and count.exact else None

    @property
    def state_tabs(self) -> list[dict]:
        """All, then each state: its link (the other filters kept, from the newest jobs), its count
        (none for a search: the counts are the filters'), and its key (0 to 9)."""
        active = self.wanted[STATE_VAR] or ALL
        counts = None if self.query else self.state_counts
        return [
            {
                "state": state,
                "url": self.get_query_string(
                    {} if state == ALL else {STATE_VAR: state}, remove=[STATE_VAR, "status__exact", FRAGMENT_VAR]
                ),
                "count": str(counts[state]) if counts else None,
                "key": str(key),
                "active": state == active,
            }
            for key, state in enumerate((ALL, *STATES))
        ]


def state_counts_of_status(counts: dict[str, Count], status: str) -> int | None:
    """A status's count from the states' (queued: theirs added up, when all are exact)."""
    parts = [counts[state] for state in QUEUED_STATES] if status == JobStatus.QUEUED else [counts.get(status)]
    return sum(part.n for part in parts) if all(part and part.exact for part in parts) else None


def status_cell(job):
    """The job's state badge and its attempts in its run ("2/5 · run 2")."""
    state = getattr(job, "state", job.display_status)
    attempts = getattr(job, "attempts", None) or run_attempts(job, None)
    return format_html(
        '<span class="status-badge s-{}">{}</span> <span title="{}">{}</span>', state, state, attempts, attempts.short
    )


def times_cell(job):
    """A queued job's wait to come (due, next attempt, the jobs it waits for) or so far, and what
    holds its queue; the others' latest run's wait and run time (an operator's retry starts a run)."""
    run, state = getattr(job, "latest_run", None), getattr(job, "state", None)
    if state == SCHEDULED:
        when = format_html("due {}", countdown_html(job.available_at))
    elif state == AWAITING_RETRY:
        when = format_html("next attempt {}", countdown_html(job.available_at))
    elif state == WAITING:
        pending = getattr(job, "pending", 0)
        when = f"for {pending} job{'' if pending == 1 else 's'}" if pending else "for other jobs"
    elif run:
        when = f"{duration(run.waited)} · {duration(run.ran)}"
    else:
        return "–"
    text = format_html_join(" · ", "{}", ((part,) for part in (when, *getattr(job, "holds", []))))
    return cell(text, title=unescape(strip_tags(text)))
