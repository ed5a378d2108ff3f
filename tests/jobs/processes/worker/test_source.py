"""Process namespaces as a work source: what a failing processor leaves behind."""

import pytest

from jobs.processes import services
from jobs.processes.models import Process
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.processes.helpers import serving

pytestmark = ALL_DATABASES_COMMITTED


def test_a_processors_error_is_stored_as_every_failure_is_masked_and_storable():
    with serving({"test.hostile": 1}), pytest.raises(services.ProcessorError) as refused:
        services.process_init(namespace="test.hostile", process_id="hostile")

    process = Process.objects.get(process_id="hostile")
    assert process.status == "error"
    assert process.detail == "RuntimeError: bad \ufffd byte, lone ? surrogate, postgres://app:***@db/x"
    assert "hunter2" not in str(refused.value)
