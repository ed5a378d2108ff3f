"""A stand-in for the Liquibase CLI in tests (no Java here): formatted-SQL changelogs
(``--changeset author:id`` blocks), ``update-sql`` and ``update-count --count=N``, the
DATABASECHANGELOG table, and, as the real one does, a run id in update-sql's bookkeeping lines."""

import re
import sys
import uuid
from pathlib import Path

import psycopg

CHANGESET = re.compile(r"^--changeset\s+(?P<author>[^:\s]+):(?P<id>\S+)")


def parse(path: str) -> list[dict]:
    changesets = []
    for line in Path(path).read_text().splitlines():
        match = CHANGESET.match(line)
        if match:
            changesets.append({"author": match["author"], "id": match["id"], "sql": []})
        elif changesets and line.strip():
            changesets[-1]["sql"].append(line)
    return changesets


def main(argv: list[str]) -> int:
    options = dict(arg.partition("=")[::2] for arg in argv if arg.startswith("--"))
    command = [arg for arg in argv if not arg.startswith("--")][-1]
    changelog = options["--changelog-file"]
    host, port, dbname = re.match(r"jdbc:postgresql://([^:/]+):(\d+)/(\w+)", options["--url"]).groups()
    with psycopg.connect(host=host, port=port, dbname=dbname, user=options["--username"], autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS databasechangelog (id text, author text, filename text)")
        applied = {row[0] for row in conn.execute("SELECT id FROM databasechangelog")}
        pending = [c for c in parse(changelog) if c["id"] not in applied]
        if command == "update-sql":
            for c in pending:
                sys.stdout.write(f"-- Changeset {changelog}::{c['id']}::{c['author']}\n")
                sys.stdout.write("\n".join(c["sql"]) + "\n")
                sys.stdout.write(
                    f"INSERT INTO public.databasechangelog (ID, DEPLOYMENT_ID) VALUES ('{c['id']}', '{uuid.uuid4().hex[:10]}');\n"
                )
            return 0
        if command != "update-count":
            sys.stderr.write(f"unexpected command {command}\n")
            return 2
        for c in pending[: int(options["--count"])]:
            sys.stderr.write(f"Running Changeset: {changelog}::{c['id']}::{c['author']}\n")
            try:
                with conn.transaction():
                    conn.execute("\n".join(c["sql"]))
                    conn.execute("INSERT INTO databasechangelog VALUES (%s, %s, %s)", [c["id"], c["author"], changelog])
            except psycopg.Error as error:
                sys.stderr.write(f"Migration failed for changeset {c['id']}: {error}\n")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
