"""The database-state servers' processes: a pid file names a server only if that process is a
postgres working in its data directory."""

import shutil
import subprocess

from jobs.dbstates.engine import postgres


def named_postgres(directory) -> str:
    """A program that sleeps, named as a server's (its process is ``postgres`` in /proc)."""
    program = directory / "postgres"
    shutil.copy(shutil.which("sleep"), program)
    return str(program)


def test_a_dead_servers_pid_file_naming_a_live_stranger_stops_nothing(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    stranger = subprocess.Popen(["sleep", "30"], cwd=tmp_path)  # the dead server's pid, come round again
    try:
        (data_dir / "postmaster.pid").write_text(f"{stranger.pid}\n{data_dir}\n1700000000\n5432\n")

        assert postgres.running(data_dir) is None
        assert postgres.stop(data_dir, immediate=True) is False
        assert stranger.poll() is None and not (data_dir / "postmaster.pid").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_program_other_than_postgres_working_in_the_data_directory_is_not_its_server(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    stranger = subprocess.Popen(["sleep", "30"], cwd=data_dir)
    try:
        (data_dir / "postmaster.pid").write_text(f"{stranger.pid}\n{data_dir}\n1700000000\n5432\n")

        assert postgres.running(data_dir) is None
        assert postgres.stop_all([data_dir], deadline=0.0) == ([], [])
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_postgres_working_in_the_data_directory_is_its_server(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = subprocess.Popen([named_postgres(tmp_path), "30"], cwd=data_dir)
    try:
        (data_dir / "postmaster.pid").write_text(f"{server.pid}\n{data_dir}\n1700000000\n5432\n")

        assert postgres.running(data_dir) == postgres.Server(data_dir=data_dir, port=5432, pid=server.pid)
        assert postgres.stop(data_dir, immediate=True) is True
        assert server.wait(timeout=5) is not None
    finally:
        server.kill()
        server.wait()
