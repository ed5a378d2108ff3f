from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from pipeline_project.audit.actions import may
from pipeline_project.core.models import ApiToken

READS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITE_ACTIONS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


def scope_needed(request, view) -> str:
    """The token scope a request needs: ``read`` for a read (or a POST that only reads, declared
    ``post_permission = "view"``), ``operate`` for an operator's action (a view that declares
    its ``operator_action``, for its writes), ``write`` for any other write."""
    method = request.method.lower()
    if request.method in READS or getattr(view, f"{method}_permission", None) == "view":
        return "read"
    return "operate" if getattr(view, "operator_action", None) else "write"


class IsDaemonOrPermittedStaff(BasePermission):
    """A bearer token whose scopes allow the request (``scope_needed``), or a staff member's
    browser session that holds the model permission the request needs, as in the admin: view
    (or change) to read, add, change or delete to write.

    A view names its model in ``permission_model``; a POST that changes rows rather than
    adding them says so with ``post_permission = "change"``. A view that declares its
    ``operator_action`` needs, to write, that action's permission (``audit.actions``), as the
    admin's button does. A view with no model (the schema, the docs, /status) needs a staff
    session only.
    """

    message = "An API token, or a staff session with the permission this request needs, is required."

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, ApiToken):
            scope = scope_needed(request, view)
            if not request.auth.allows(scope):
                held = ", ".join(request.auth.scopes)
                raise PermissionDenied(
                    f"This token's scopes ({held}) do not include {scope}, which this request needs."
                )
            return True
        user = request.user
        if not (user and user.is_authenticated and user.is_staff):
            return False
        if scope_needed(request, view) == "operate":
            return may(user, view.operator_action)
        model = getattr(view, "permission_model", None)
        if model is None:
            return True
        if request.method in READS:
            actions = ("view", "change")
        else:
            actions = (
                getattr(view, f"{request.method.lower()}_permission", WRITE_ACTIONS.get(request.method, "change")),
            )
        opts = model._meta
        return any(user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}") for action in actions)
