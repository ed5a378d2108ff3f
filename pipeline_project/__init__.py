"""Pipeline control plane: project package (settings, urls, routing, bootstrap)."""

__version__ = "0.2.0"
