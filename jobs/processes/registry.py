"""The ``@namespace`` API's documented path before it moved to :mod:`jobs.processes.namespaces`;
kept so that processor modules written against it keep working. New code imports
``jobs.processes.namespaces``."""

from jobs.processes.namespaces import Namespace, RetryPolicy, namespace

__all__ = ["Namespace", "RetryPolicy", "namespace"]
