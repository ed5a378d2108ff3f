"""The system users PostgreSQL servers run as when the project runs as root (PostgreSQL refuses
root): the embedded server's and the database-state engine's."""

import fcntl
import pwd
import subprocess
import tempfile
from pathlib import Path

# One lock for every caller, whatever its checkout or TMPDIR: the race is between processes.
LOCK_PATH = (Path("/run/lock") if Path("/run/lock").is_dir() else Path(tempfile.gettempdir())) / "pipeline-useradd.lock"


def system_user_ensure(*, name: str, useradd_options: tuple[str, ...]) -> None:
    """Make the system user ``name`` if missing, one process at a time. Looked up and made
    unlocked, the suite's workers on a new machine each made one, and a worker left with a uid
    whose passwd entry another had overwritten failed every test (initdb: "could not look up
    effective user ID")."""
    with open(LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", *useradd_options, name], check=True, capture_output=True)
