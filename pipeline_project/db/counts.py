"""Row counts of a big table, kept in a small one, so that a page or a scrape never counts millions
of rows.

Statement-level triggers append what each statement changed to the counts table: per
combination of the counted columns, +1 for each new row and -1 for each old one, summed over
the statement (``new_values``/``old_values``), one row per combination that changed. Appended,
never updated: two writers never wait for each other on a counter row. A read sums the rows per
combination; a periodic task folds them into one row per combination (one statement: a reader
sees the rows before or after, never both) and vacuums the table, so it stays a few hundred rows.
TRUNCATE of the counted table empties the counts.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import pgtrigger

from pipeline_project.db import sql
from pipeline_project.db.connections import apart_from_this_transaction


@dataclass(frozen=True)
class RowCounts:
    """The row counts of ``table`` by ``columns``, kept in ``counts_table``."""

    table: str  # the counted table
    counts_table: str
    columns: Sequence[str]  # what rows are counted by
    alias: str = "default"  # the database of both tables

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


def sum_matching(rows: list[tuple], wanted: Sequence[str | None]) -> int:
    """The sum of the counts rows ``(*values, n)`` (``RowCounts.read()``'s) whose values are those
    ``wanted`` (compared as text, as a query string gives them; None: any)."""
    return sum(
        row[-1]
        for row in rows
        if all(value in (None, str(found)) for value, found in zip(wanted, row[:-1], strict=True))
    )
