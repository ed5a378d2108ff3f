"""The manual (``docs/``, ``mkdocs.yml``) builds with ``--strict``: a broken link, a missing page or
an anchor that is gone fails the suite. Its API reference is the schema the service serves."""

import os
import subprocess
import sys
from pathlib import Path

from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent


def test_the_api_reference_is_the_schema_the_service_serves(tmp_path):
    generated = tmp_path / "openapi.yaml"
    call_command("spectacular", file=str(generated))
    assert generated.read_text() == (ROOT / "docs/api/openapi.yaml").read_text(), "run `make api-reference`"


def test_the_manual_builds_without_a_warning(tmp_path):
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        check=False,  # its stderr says what broke
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    reference = (site / "api/index.html").read_text()
    assert reference.count("/api/v1/jobs") > 10  # the schema is rendered, operation by operation
    pages = [path.relative_to(site).as_posix() for path in site.rglob("index.html")]
    assert {"systems/jobs/index.html", "operating/faults/index.html", "concepts/index.html"} <= set(pages)
