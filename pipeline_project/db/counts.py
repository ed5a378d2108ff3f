"""Row counts of a big table, kept in a small one, so that a page or a scrape never counts millions
of rows.

Statement-level triggers append what each statement changed to the counts table: per
combination of the counted columns, +1 for each new row and -1 for each old one, summed over
the statement (``new_values``/``old_values``), one row per combination that changed. Appended,
never updated: two writers never wait for each other on a counter row. A read sums the rows per
combination; a periodic task folds them into one row per combination (one statement: a reader
sees the rows before or after, never both) and vacuums the table, so it stays a few hundred rows.
TRUNCATE of the counted table empties the counts.

A load that skips triggers (``pg_restore --disable-triggers``, logical replication's apply,
``session_replication_role = replica``) leaves the counts wrong: :meth:`RowCounts.rebuild`
(``manage.py rebuildcounts``) appends what each combination lacks, counted from the table, and
:meth:`RowCounts.disagreement` (``/status``) compares them with the table on a sample.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pgtrigger

from pipeline_project.db import sql
from pipeline_project.db.connections import apart_from_this_transaction
from pipeline_project.db.snapshot import snapshot


@dataclass(frozen=True)
class RowCounts:
    """The row counts of ``table`` by ``columns``, kept in ``counts_table``."""

    table: str  # the counted table
    counts_table: str
    columns: Sequence[str]  # what rows are counted by
    alias: str = "default"  # the database of both tables
    # A counted column no row ever changes, led by an index: a rebuild reads the table a value of it
    # at a time (each in a statement of its own), and /status counts its least value exactly.
    batch_by: str | None = None

    def __post_init__(self):
        KEPT.append(self)

    @property
    def _columns(self) -> str:
        return ", ".join(self.columns)

    def triggers(self, *, name: str, operations: Sequence[str] = ("ins", "upd", "del")) -> list[pgtrigger.Composer]:
        """The AFTER statement triggers of ``operations`` (``<name>_ins``, ``_upd``, ``_del``) and
        the TRUNCATE one. A table with statement triggers of its own on INSERT or UPDATE runs
        :meth:`append_sql` in theirs instead (one trigger call per statement, not two)."""
        kinds = {"ins": pgtrigger.Insert, "upd": pgtrigger.Update, "del": pgtrigger.Delete}
        return [
            *(
                pgtrigger.Composer(
                    name=f"{name}_{suffix}",
                    level=pgtrigger.Statement,
                    when=pgtrigger.After,
                    operation=kinds[suffix],
                    func=self.append_sql(new=suffix != "del", old=suffix != "ins") + " RETURN NULL;",
                )
                for suffix in operations
            ),
            pgtrigger.Trigger(
                name=f"{name}_trunc",
                level=pgtrigger.Statement,
                when=pgtrigger.After,
                operation=pgtrigger.Truncate,
                func=f"DELETE FROM {self.counts_table}; RETURN NULL;",
            ),
        ]

    def append_sql(self, *, new: bool, old: bool) -> str:
        """The statement a trigger runs to append what it changed: ``new_values`` counted in
        (INSERT, UPDATE), ``old_values`` counted out (UPDATE, DELETE)."""
        changed = []
        if new:
            changed.append(f"SELECT {self._columns}, count(*) AS n FROM new_values GROUP BY {self._columns}")
        if old:
            changed.append(f"SELECT {self._columns}, -count(*) AS n FROM old_values GROUP BY {self._columns}")
        return (
            f"INSERT INTO {self.counts_table} ({self._columns}, n) SELECT {self._columns}, sum(n) "
            f"FROM ({' UNION ALL '.join(changed)}) AS changed GROUP BY {self._columns} HAVING sum(n) <> 0;"
        )

    def read(self) -> list[tuple]:
        """``(*columns, n)`` for every combination with rows."""
        return sql.rows(
            f"SELECT {self._columns}, sum(n)::bigint FROM {self.counts_table} "
            f"GROUP BY {self._columns} HAVING sum(n) <> 0 ORDER BY {self._columns}",
            {},
            using=self.alias,
        )

    def compact(self) -> dict:
        """Fold the appended rows into one per combination; then vacuum the counts table, whose
        rows die at every fold (VACUUM needs a connection outside any transaction). No truncation:
        its ACCESS EXCLUSIVE lock would stop every write to the counted table meanwhile."""
        [(before, after)] = sql.rows(
            f"""
            WITH folded AS (DELETE FROM {self.counts_table} RETURNING {self._columns}, n),
            kept AS (
                INSERT INTO {self.counts_table} ({self._columns}, n)
                SELECT {self._columns}, sum(n) FROM folded GROUP BY {self._columns} HAVING sum(n) <> 0
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM folded), (SELECT count(*) FROM kept)
            """,
            {},
            using=self.alias,
        )
        if before > after:
            apart_from_this_transaction(
                lambda: sql.execute(f"VACUUM (SKIP_LOCKED, TRUNCATE false) {self.counts_table}", {}, using=self.alias)
            )
        return {"folded": before - after}

    def rebuild(self) -> dict:
        """Append to every combination what its kept count lacks, counted from the table, then fold.
        Online: each statement reads one snapshot, in which a committed change's rows and its
        trigger's counts are both seen or both not, so what it appends is exact whatever commits
        meanwhile; it takes no lock writers wait for. Idempotent: a second run appends nothing."""
        corrected = rows_off = 0
        for value in self._batches():
            batched = value is not _WHOLE
            [(combinations, off)] = sql.rows(
                self._correct_sql(batched), {"value": value} if batched else {}, using=self.alias
            )
            corrected, rows_off = corrected + combinations, rows_off + off
        return {"table": self.table, "corrected": corrected, "rows_off": rows_off, **self.compact()}

    def _batches(self) -> list:
        if self.batch_by is None:
            return [_WHOLE]
        return sorted(self._values_in_table() | self._values_counted(), key=str)

    def _values_in_table(self) -> set:
        """Each value of ``batch_by`` in the table: a skip over the index its column leads, a probe a value."""
        column = self.batch_by
        walk = f"""
            WITH RECURSIVE walk AS (
                (SELECT {column} AS v FROM {self.table} ORDER BY {column} LIMIT 1)
                UNION ALL
                SELECT (SELECT {column} FROM {self.table} WHERE {column} > walk.v ORDER BY {column} LIMIT 1)
                FROM walk WHERE walk.v IS NOT NULL
            )
            SELECT v FROM walk WHERE v IS NOT NULL
        """
        return {value for (value,) in sql.rows(walk, {}, using=self.alias)}

    def _values_counted(self) -> set:
        counted = f"SELECT {self.batch_by} FROM {self.counts_table} GROUP BY 1 HAVING sum(n) <> 0"
        return {value for (value,) in sql.rows(counted, {}, using=self.alias)}

    def _correct_sql(self, batched: bool) -> str:
        where = f"WHERE {self.batch_by} = %(value)s" if batched else ""
        cols = self._columns
        return f"""
            WITH off AS (
                SELECT {cols}, sum(n) AS n FROM (
                    SELECT {cols}, count(*) AS n FROM {self.table} {where} GROUP BY {cols}
                    UNION ALL
                    SELECT {cols}, -sum(n) FROM {self.counts_table} {where} GROUP BY {cols}
                ) AS both_sides GROUP BY {cols} HAVING sum(n) <> 0
            ),
            appended AS (INSERT INTO {self.counts_table} ({cols}, n) SELECT {cols}, n FROM off RETURNING n)
            SELECT count(*), coalesce(sum(abs(n)), 0)::bigint FROM appended
        """

    def disagreement(self, *, sample_rows: int) -> dict | None:
        """What shows the counts wrong, or None: their total against the planner's estimate of the
        table's rows (ANALYZE's, autovacuum's), off by more than a tenth and 1,000 rows; the values of
        ``batch_by`` in the table against those counted; and the least of them holding at most
        ``sample_rows`` rows, counted exactly. All in one snapshot."""
        with snapshot(using=self.alias):
            return self._disagreement(sample_rows=sample_rows)

    def _disagreement(self, *, sample_rows: int) -> dict | None:
        [(kept,)] = sql.rows(f"SELECT coalesce(sum(n), 0)::bigint FROM {self.counts_table}", {}, using=self.alias)
        [(estimated,)] = sql.rows(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = %(t)s::regclass", {"t": self.table}, using=self.alias
        )
        if estimated >= 0 and abs(kept - estimated) > max(1000, estimated / 10):
            return {"kept": kept, "estimated": estimated}
        if self.batch_by is None:
            return None
        column = self.batch_by
        in_table, counted = self._values_in_table(), self._values_counted()
        if in_table != counted:
            return {
                f"{column} values uncounted": sorted(in_table - counted, key=str)[:10],
                f"{column} values counted, not in the table": sorted(counted - in_table, key=str)[:10],
            }
        # The least value, then its rows counted in a statement of its own: planned for that value
        # (rare: read through the index). Planned for any value, a scan that stops once it has
        # found enough looked as cheap, and read the table whole for a rare one.
        least = sql.rows(
            f"""
            SELECT {column}, sum(n)::bigint FROM {self.counts_table} GROUP BY 1
            HAVING sum(n) BETWEEN 1 AND %(at_most)s ORDER BY 2 LIMIT 1
            """,
            {"at_most": sample_rows},
            using=self.alias,
        )
        if not least:
            return None
        [(value, kept)] = least
        [(there,)] = sql.rows(
            f"SELECT count(*) FROM (SELECT FROM {self.table} WHERE {column} = %(value)s LIMIT %(at_most)s + 1) AS rows",
            {"value": value, "at_most": sample_rows},
            using=self.alias,
        )
        if kept != there:
            return {column: value, "kept": kept, "counted": there}
        return None


_WHOLE = object()  # a rebuild's one batch: the whole table
KEPT: list[RowCounts] = []  # every RowCounts made (the apps' models make theirs)


def sum_matching(rows: list[tuple], wanted: Sequence[str | None]) -> int:
    """The sum of the counts rows ``(*values, n)`` (``RowCounts.read()``'s) whose values are those
    ``wanted`` (compared as text, as a query string gives them; None: any)."""
    return sum(
        row[-1]
        for row in rows
        if all(value in (None, str(found)) for value, found in zip(wanted, row[:-1], strict=True))
    )
