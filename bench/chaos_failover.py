"""The chaos bench's failovers: a primary and a streaming standby on this machine, the service
given both (``host=a,b`` with ``target_session_attrs=read-write``), and the primary replaced.

    failover        the primary stopped hard (immediate) and the standby promoted at once; the
                    old primary stays down (asynchronous replication: the last commits may be lost)
    failover-sync   the same with the standby synchronous (``synchronous_standby_names = '*'``):
                    a commit the producer was told of is on the standby before it is told
    switchover      planned: the primary stopped cleanly, the standby promoted, the old primary
                    rewound and started again as the new one's standby
    read-only       the primary fenced read-only under the service (``default_transaction_read_only``
                    reloaded: its sessions get SQLSTATE 25006 on writes), the standby promoted, the
                    old primary left up and read-only, then rewound and made a standby (there
                    ``pg_is_in_recovery()`` is true); every connection must leave it

Counted besides the chaos table: the jobs the producer was told were enqueued that the new
primary lacks (by their idempotency keys).
"""

import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg
from fleet import _as_postgres, pg_ctl, postgres_bin, scratch_server

# Replication, and pg_rewind (which needs the hint bits logged) for a former primary's return.
REPLICATION_SETTINGS = "wal_level = replica\nwal_log_hints = on\nmax_wal_senders = 10\nhot_standby = on\n"
READ_ONLY_HELD_SEC = 10  # the fenced primary stays up this long, read-only, before it is made a standby (--fault-sec)


@contextmanager
def replicated_pair(directory: Path, *, synchronous: bool):
    """A primary (``directory/primary``) and its streaming standby (``directory/standby``); yields
    (psycopg parameters naming both, in that order, for the one taking writes; the two directories)."""
    extra = REPLICATION_SETTINGS + ("synchronous_standby_names = '*'\n" if synchronous else "")
    (directory / "primary").mkdir()
    with scratch_server(directory / "primary", extra=extra) as (primary, _log):
        standby_dir = directory / "standby"
        standby_dir.mkdir()
        if os.geteuid() == 0:
            shutil.chown(standby_dir, "postgres")
        port = _standby_of(primary["port"], standby_dir)
        try:
            both = {
                "host": "127.0.0.1,127.0.0.1",
                "port": f"{primary['port']},{port}",
                "user": "postgres",
                "dbname": "postgres",
                "target_session_attrs": "read-write",
            }
            yield both, directory / "primary", standby_dir
        finally:
            pg_ctl(standby_dir, "-m", "fast", "stop", check=False)


def _standby_of(primary_port: int, directory: Path, *, port: int | None = None) -> int:
    """A base backup of the primary at ``primary_port`` in ``directory/data``, started as its standby."""
    from common import free_port

    port = port or free_port()
    data = directory / "data"
    command = [postgres_bin() / "pg_basebackup", "-D", data, "-R", "-X", "stream", "-c", "fast"]
    subprocess.run(
        [*_as_postgres(), *command, "-h", "127.0.0.1", "-p", str(primary_port), "-U", "postgres"], check=True
    )
    # Promoted, it has no standby of its own: waiting for a synchronous one would stop every commit
    # (a failover manager such as Patroni lowers it the same way).
    _set(data, port=str(port), synchronous_standby_names="")
    pg_ctl(directory, "-l", directory / "server.log", "start")
    return port


def _set(data: Path, **settings: str) -> None:
    """Settings in ``data``'s postgresql.auto.conf, each replacing any earlier line of its name
    (``None``: removed)."""
    auto = data / "postgresql.auto.conf"
    kept = [line for line in auto.read_text().splitlines() if line.split("=")[0].strip() not in settings]
    added = [f"{name} = '{value}'" for name, value in settings.items() if value is not None]
    auto.write_text("\n".join(kept + added) + "\n")


def _port_of(directory: Path) -> int:
    lines = (directory / "data" / "postgresql.auto.conf").read_text().splitlines()
    return int(next(line for line in lines if line.split("=")[0].strip() == "port").split("=")[1].strip(" '"))


def _promote(directory: Path) -> None:
    pg_ctl(directory, "promote")


def _rejoin_as_standby(old_primary: Path, new_primary: Path) -> None:
    """The old primary, stopped, rewound to the new primary's timeline and started as its standby."""
    pg_ctl(old_primary, "-m", "fast", "stop", check=False)
    port, source = _port_of(old_primary), _port_of(new_primary)
    rewind = [postgres_bin() / "pg_rewind", "-D", old_primary / "data"]
    subprocess.run(
        [*_as_postgres(), *rewind, f"--source-server=host=127.0.0.1 port={source} user=postgres dbname=postgres"],
        check=True,
        capture_output=True,
    )
    (old_primary / "data" / "standby.signal").touch()
    # pg_rewind copied the new primary's settings: its port, and none of the fencing.
    conninfo = f"host=127.0.0.1 port={source} user=postgres"
    _set(old_primary / "data", port=str(port), primary_conninfo=conninfo, default_transaction_read_only=None)
    pg_ctl(old_primary, "-l", old_primary / "server.log", "start")


def failover(rig, seconds: float) -> None:
    pg_ctl(rig.directory, "-m", "immediate", "stop")
    _promote(rig.standby)


def switchover(rig, seconds: float) -> None:
    pg_ctl(rig.directory, "-m", "fast", "stop")
    _promote(rig.standby)
    _rejoin_as_standby(rig.directory, rig.standby)


def read_only(rig, seconds: float) -> None:
    """Fenced, caught up, promoted: how an operator (or Patroni) hands over from a primary that
    is still up. The old one stays up read-only for ``seconds``, then becomes a standby."""
    with _connect(rig.directory) as conn:
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        conn.execute("SELECT pg_reload_conf()")
        written = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    with _connect(rig.standby) as conn:  # everything the primary committed is on the standby
        while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [written]).fetchone()[0]:
            time.sleep(0.01)
    _promote(rig.standby)
    time.sleep(seconds)
    _rejoin_as_standby(rig.directory, rig.standby)
    rig.counters["old primary in recovery"] = _in_recovery(rig.directory)


def _connect(directory: Path) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=_port_of(directory), user="postgres", autocommit=True)


def _in_recovery(directory: Path) -> bool:
    deadline = time.monotonic() + 30
    while True:
        try:
            with _connect(directory) as conn:
                return conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def enqueued_then_missing(conn, tag: str, offered: int) -> int:
    """Jobs the producer was told were enqueued (keys ``tag-0`` … ``tag-(offered-1)``) that the
    database lacks: with asynchronous replication, the commits a failover lost."""
    return conn.execute(
        "SELECT count(*) FROM generate_series(0, %(offered)s - 1) AS n "
        "WHERE NOT EXISTS (SELECT 1 FROM dl_jobs WHERE idempotency_key = %(tag)s || '-' || n)",
        {"offered": offered, "tag": tag},
    ).fetchone()[0]
