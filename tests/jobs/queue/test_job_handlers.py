"""The built-in handlers, run by a worker."""

import pytest

import jobs.queue.job_handlers  # noqa: F401  (registers the jobs.* handlers)
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED


def test_sleep_reports_progress_and_returns():
    enqueued = enqueue(task="jobs.sleep", args={"seconds": 0.2, "chunk": 0.05})

    with running_worker(progress_interval_sec=0):
        done = wait_for_status(enqueued.job_id, "succeeded")

    assert done.progress == {"slept": 0.2, "of": 0.2}


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ({"seconds": 1, "chunk": 0}, "args.chunk must be a number from 0.01 to 3600.0, not 0"),
        ({"seconds": -1}, "args.seconds must be a number from 0.0 to 86400.0, not -1"),
        ({"seconds": "5"}, "args.seconds must be a number from 0.0 to 86400.0, not '5'"),
        ({"seconds": True}, "args.seconds must be a number from 0.0 to 86400.0, not True"),
    ],
)
def test_sleep_refuses_bad_args_at_once(args, complaint):
    enqueued = enqueue(task="jobs.sleep", args=args, max_attempts=5)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert failed.attempt == 1 and failed.error == f"FatalError: {complaint}"
