"""One answer, one snapshot: reads that build one answer see one state of the database.

Under READ COMMITTED every statement sees the database as of its own start, so an answer built
from two reads can mix a row from before a change with its history from after it, or find that
the row it read first is gone. ``snapshot()`` runs the reads in one REPEATABLE READ, READ ONLY
transaction: every statement in it sees the database as of the first one.

    @snapshot()
    def process_get(*, namespace, process_id): ...   # as a decorator

    with snapshot(using="pipeline"):                # or around the reads
        ...

Inside a transaction that is already open (a service's, a test's), the reads join it: its
isolation level is set by whoever opened it. Nothing here holds session state, so it works
behind a transaction-pooling PgBouncer.
"""

from contextlib import contextmanager
from functools import wraps

from django.db import DEFAULT_DB_ALIAS, connections, transaction


@contextmanager
def snapshot(*, using: str = DEFAULT_DB_ALIAS):
    connection = connections[using]
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def rendered_in_snapshot(view):
    """Run a page's view (a callable without arguments) and render its template in one snapshot:
    every read of the answer (the template's lazy ones too) sees one state of the database."""
    with snapshot():
        response = view()
        if hasattr(response, "render"):
            response.render()
    return response


def read_in_snapshot(view):
    """``view`` answering GET and HEAD from one snapshot, its template rendered inside it
    (:func:`rendered_in_snapshot`); other methods (actions) as they are."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method not in ("GET", "HEAD"):
            return view(request, *args, **kwargs)
        return rendered_in_snapshot(lambda: view(request, *args, **kwargs))

    return wrapper
