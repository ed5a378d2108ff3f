"""How many rows a page reads of its big tables: each SELECT it sends, run again under EXPLAIN
ANALYZE, with the most rows any of its scans of those tables returned. A page bounded at any size
reads a page of rows (and counts kept apart), whatever the table holds; one that counts or
lists everything reads it all. Shared by the at-size tests of the run, process and tracking pages."""

from collections.abc import Callable

from django.db import connections

from tests.helpers import capturing


def statements_of(call: Callable[..., object], *args) -> tuple[object, list[tuple[str, str, object]]]:
    """``call(*args)``'s answer and every statement either database ran meanwhile: ``(alias, sql, params)``."""
    with capturing() as sent:
        answer = call(*args)
    return answer, sent


def _rows_scanned(plan: dict, tables: set[str], *, filtered: bool) -> int:
    """The most rows one scan of ``tables`` in the plan returned (over all its loops), and with
    ``filtered`` those its filter removed too (an index walked for rare rows returns few, reads many)."""
    read = plan.get("Actual Rows", 0) + (plan.get("Rows Removed by Filter", 0) if filtered else 0)
    here = read * plan.get("Actual Loops", 1) if plan.get("Relation Name") in tables else 0
    return max([here, *(_rows_scanned(child, tables, filtered=filtered) for child in plan.get("Plans", []))])


def rows_read(
    call: Callable[..., object], *args, tables: set[str], filtered: bool = False
) -> tuple[object, dict[str, int]]:
    """``call(*args)``'s answer (a test client's ``get`` and a path, say), and for each SELECT it
    sent that scans one of ``tables``: the most rows a scan of them returned, or with ``filtered``
    read (by its text, shortened)."""
    answer, sent = statements_of(call, *args)
    read: dict[str, int] = {}
    for alias, sql, params in sent:
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        with connections[alias].cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            [plan] = cursor.fetchone()[0]
        if rows := _rows_scanned(plan["Plan"], tables, filtered=filtered):
            read[sql[:400]] = max(rows, read.get(sql[:400], 0))
    return answer, read
