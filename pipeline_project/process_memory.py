"""The objects a long-running process makes as it starts, kept out of the collector's full passes.

A full pass of Python's cyclic collector walks every object the process holds: in a web worker,
about 150,000 of them, most of them Django, the apps' modules and the compiled templates, made
once and kept for the process's life. On this project's machines a pass took 60-130 ms, and it
fell inside whichever request happened to allocate at the time: one dashboard in twenty took
twice its median. Frozen (``gc.freeze``), they are never walked again; what a request leaves
behind still is. Objects frozen here live as long as the process, so nothing made for one
request may be frozen: this runs before the first one.
"""

import gc
from pathlib import Path

from django.template import TemplateDoesNotExist, TemplateSyntaxError, engines
from django.urls import get_resolver


def startup_objects_freeze(*, templates: bool) -> int:
    """Import every view (and with ``templates`` compile every template) the process would
    otherwise load on first use, then freeze all it holds; the count frozen."""
    get_resolver().url_patterns  # noqa: B018 - the URLconf's views imported now, not by the first request
    if templates:
        for name in _template_names():
            try:
                engines["django"].get_template(name)  # kept by the cached loader
            except (TemplateDoesNotExist, TemplateSyntaxError):
                continue  # a fragment only ever included, or one the engine never finds by that name
    gc.collect()  # what setting up left as garbage is dropped, not kept for good
    gc.freeze()
    return gc.get_freeze_count()


def _template_names() -> set[str]:
    return {
        str(path.relative_to(directory))
        for directory in map(Path, engines["django"].template_dirs)
        for path in directory.rglob("*.html")
    }
