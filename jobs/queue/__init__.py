"""The job queue (seed 002): ``dl_jobs`` and its events, counts, dependencies and queues.

Its states and their transitions are in ``states``; every change of a job goes through
``services`` (producers, claims, outcomes, leases, operators, maintenance), every read through
``selectors``; ``handlers`` is the ``@task`` API handler modules write against; ``worker`` is the
queue as a work source of the runtime; ``console`` its pages in the admin. The app label stays
``jobs``, the label its tables and migrations were made under.

May import: the shared layers (``pipeline_project.api``, ``web``, ``db``), the audit trail's
services and the runtime. Other systems reach it only through ``services``, ``selectors`` and
``handlers``.
"""
