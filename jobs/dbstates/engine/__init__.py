"""The engine on this host: PostgreSQL installations as images (``images``), the state store on
disk (``statefs``), the servers it starts (``postgres``, stopped with the service by
``servers``), a prepare's arguments and ids (``prepare_args``) and its plan (``plans``), its steps
(``steps``, ``liquibase``), the executor that runs a prepare job (``executor``), runs of psql and
pgbench against an instance (``runs``), where the engine lives (``placement``) and who it is
(``identity``).

May import: the shared layers, the runtime's subprocesses and registry, the queue's ``handlers``,
and its own app's ``models`` and ``services`` (the executor records what it built).
"""
