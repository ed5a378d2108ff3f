"""Background work: a namespace of systems, each an app (or, for the runtime, a kit) of its own.

- ``queue``: seed 002's job queue (``dl_jobs``, app label ``jobs``): triggers, claims, outcomes,
  its states (``queue.states``), its console and its worker side.
- ``runtime``: the one worker runtime behind ``runworker`` and ``runreaper``; every kind of work
  plugs into it by registering.
- ``processes``: seed 001's durable processes with timers, served by the runtime.
- ``schedules``: recurring schedules, enqueuing onto the queue.
- ``dbstates``: seed 003's sqlrs engine API, its engine in ``dbstates.engine``.

Nothing lives at this root: a module here would belong to no system.
"""
