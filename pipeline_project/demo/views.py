"""The demo's website, served by the service itself so that its ingestion run needs no internet."""

from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404
from django.views.decorators.http import require_safe
from django.views.static import serve

from pipeline_project.demo.config import SITE_DIR


@require_safe
def site_file(request, path: str = "index.html"):
    """A page or file of the demo site (Django's static serve: no path outside SITE_DIR, a
    Content-Type by extension, Last-Modified and 304s). No login: the ingestion fetcher is anonymous."""
    if not path or path.endswith("/"):
        path += "index.html"
    try:
        return serve(request, path, document_root=SITE_DIR)
    except (Http404, SuspiciousFileOperation):  # a path outside SITE_DIR is just not in the site
        raise Http404("no such page in the demo site") from None
