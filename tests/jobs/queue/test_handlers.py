"""Both kinds of handler module load one way: every installed app's module of a name, then the
modules a setting lists and those a command line adds."""

import os
import subprocess
import sys

import pytest

from jobs.processes.namespaces import load_processor_modules
from jobs.queue.handlers import load_handler_modules
from jobs.runtime import registry as runtime_registry


@pytest.fixture
def modules_in(monkeypatch, tmp_path):
    """Write empty modules by name on a temporary path; forget them afterwards."""

    def write(*names):
        for name in names:
            (tmp_path / f"{name}.py").write_text("")
            monkeypatch.delitem(sys.modules, name, raising=False)
        return names

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for path in tmp_path.glob("*.py"):
        sys.modules.pop(path.stem, None)


@pytest.mark.parametrize(
    ("load", "app_module", "setting"),
    [
        (load_handler_modules, "job_handlers", "JOBS_HANDLER_MODULES"),
        (load_processor_modules, "processors", "PROCESSES_HANDLER_MODULES"),
    ],
)
def test_apps_modules_then_the_setting_s_then_the_extra_ones_load(
    load, app_module, setting, settings, monkeypatch, modules_in
):
    listed, extra = modules_in(f"listed_{app_module}", f"extra_{app_module}")
    setattr(settings, setting, [listed])
    discovered = []
    monkeypatch.setattr(runtime_registry, "autodiscover_modules", discovered.append)

    load([extra])

    assert discovered == [app_module]
    assert listed in sys.modules and extra in sys.modules


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({"PROCESSES_HANDLER_MODULES": "a.b, c"}, ["a.b", "c"]),
        ({"PROCESSOR_MODULES": "old.name"}, ["old.name"]),  # the deprecated name still works
        ({"PROCESSES_HANDLER_MODULES": "new", "PROCESSOR_MODULES": "old"}, ["new"]),
    ],
)
def test_namespace_modules_setting_and_its_deprecated_name(environment, expected):
    env = {
        key: value for key, value in os.environ.items() if key not in ("PROCESSES_HANDLER_MODULES", "PROCESSOR_MODULES")
    }
    answer = subprocess.run(
        [sys.executable, "-c", "from pipeline_project import settings; print(settings.PROCESSES_HANDLER_MODULES)"],
        env={**env, **environment},
        capture_output=True,
        text=True,
        check=True,
    )
    assert answer.stdout.strip() == repr(expected)
