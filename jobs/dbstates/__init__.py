"""Database states (seed 003): the sqlrs engine's API over prepare jobs, states and instances.

The app keeps the engine's metadata (``models``), changes it in ``services`` and reads it in
``selectors``, shaped as sqlrs's entries; ``api`` serves ``/sqlrs/v1``; ``cache`` and ``config``
are the engine's budget and settings; ``deletion_tree`` what a deletion covers. The engine itself,
what runs on this host, is ``engine``. Prepare jobs run on the queue as ``sqlrs.prepare``.

May import: the shared layers, the core app's token service (``engine.json``), the audit trail's
services, the runtime, and the queue's ``services``, ``selectors`` and ``handlers``.
"""
