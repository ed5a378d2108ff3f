"""The worker runtime: one process model for every kind of background work.

A ``runworker`` process is a :class:`~jobs.runtime.loop.Runtime` serving one or more work
sources (the job queue: ``jobs.queue.worker``; process namespaces: ``jobs.processes.worker``), built by
:mod:`build` from its configuration (:mod:`config`) and what apps registered (:mod:`registry`:
kinds of work and their settings, periodic tasks and their ledger, start checks, module
options); ``runreaper`` runs the periodic tasks alone. The runtime imports no app (the
code-shape test holds it to that); it owns what every kind of work needs the same way:

- the control loop (:mod:`loop`): it sleeps on a wake-up pipe and one LISTEN connection until
  the nearest deadline any source names, hands notifications to the source that listens on
  their channel, lets each source take its small steps, stops and drains on SIGTERM, and
  backs off on database errors, all in one place;
- lanes (:mod:`lanes`): named pools of handler threads with slot accounting, where every run
  ends with an outcome, even when it raises ``BaseException``;
- a batch recorder (:mod:`recorder`) that writes finished runs on its own thread;
- periodic tasks (:mod:`periodic`), each run by one process at a time, off the control loop;
- run signals (:mod:`signals`): cancel and lease-lost as events; and subprocesses that die
  with their run (:mod:`subprocesses`).

A work source (:class:`~jobs.runtime.loop.WorkSource`) brings the rest: what to claim, how
to run it, what to write when it ends.

May import: the shared layers (``pipeline_project.db``) and nothing of any app.
"""
