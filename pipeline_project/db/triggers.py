"""Statement-level NOTIFY triggers, declared with django-pgtrigger.

A statement-level trigger runs its function once per statement and reads every changed row
from the transition tables ``new_values`` (and, for UPDATE, ``old_values``), so a bulk
insert of thousands of rows sends one notification per queue from one function call,
instead of calling a function and queueing a notification per row.
"""

from collections.abc import Callable

import pgtrigger


def statement_trigger(*, name: str, operation, func: str) -> pgtrigger.Composer:
    """An AFTER ``operation`` statement-level trigger running ``func`` (PL/pgSQL reading
    ``new_values``, and ``old_values`` for an UPDATE)."""
    return pgtrigger.Composer(
        name=name, level=pgtrigger.Statement, when=pgtrigger.After, operation=operation, func=func
    )


def statement_notify_triggers(*, name: str, body: Callable[[bool], str]) -> list[pgtrigger.Composer]:
    """AFTER INSERT (``<name>_ins``) and AFTER UPDATE (``<name>_upd``) statement triggers.

    ``body(compare_with_old)`` returns the PL/pgSQL that sends the notifications; it may read
    ``old_values`` only when ``compare_with_old`` is true (the UPDATE trigger).
    """
    return [
        statement_trigger(name=f"{name}_{suffix}", operation=operation, func=body(operation == pgtrigger.Update))
        for suffix, operation in (("ins", pgtrigger.Insert), ("upd", pgtrigger.Update))
    ]
