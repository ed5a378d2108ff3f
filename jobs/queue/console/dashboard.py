"""The jobs dashboard's data: the jobs every queue finished in the window (a chart), each queue's
row as the queues page shows it (``queues_page``), and the workers as the workers page lists them."""

from jobs.queue.console import charts
from jobs.queue.console.queues_page import Permissions, queues_view
from jobs.queue.console.workers_page import workers_view


def context(*, window: charts.Window, permissions: Permissions, back_to: str) -> dict:
    return {**queues_view(window=window, permissions=permissions, back_to=back_to), **workers_view()}
