"""The servers' system user: made once however many processes start at once."""

import os
import pwd
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making a system user needs root")

RACER = """
import sys, pwd
from pipeline_project.system_users import system_user_ensure
system_user_ensure(name=sys.argv[1], useradd_options=("--system", "--no-create-home"))
print(pwd.getpwnam(sys.argv[1]).pw_uid)
"""


def test_processes_starting_at_once_make_one_user_and_all_see_its_uid():
    name = f"pgtest{os.getpid() % 100000}"
    try:
        with ThreadPoolExecutor(8) as pool:
            runs = list(
                pool.map(
                    lambda _: subprocess.run(
                        [sys.executable, "-c", RACER, name],
                        capture_output=True,
                        text=True,
                        check=True,
                    ),
                    range(8),
                )
            )
        uids = {run.stdout.strip() for run in runs}
        assert uids == {str(pwd.getpwnam(name).pw_uid)}
    finally:
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)  # it may not exist
