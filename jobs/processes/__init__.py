"""Durable processes (seed 001): a namespace's processes with their tasks, events and timers.

``namespaces`` is the ``@namespace`` API processor modules write against; ``services`` holds the
protocol (init, step, repair) and every state change, ``selectors`` the reads; ``worker`` serves
the namespaces as a work source of the runtime.

May import: the shared layers, the audit trail's services, the runtime, and the queue's
``services`` (a process step may enqueue a job).
"""
