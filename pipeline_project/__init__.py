"""Pipeline control plane: project package (settings, urls, routing, bootstrap)."""

__version__ = "0.1.0"
