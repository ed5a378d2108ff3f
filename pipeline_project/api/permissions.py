"""Who may make a request: a token by its scopes, a staff session by its permissions.

Operator actions are the audit app's: ``settings.API_OPERATOR_ACTION_ALLOWED`` names the
function ``(user, action name) -> bool`` that says whether a staff user may perform one.
"""

from django.conf import settings
from django.utils.module_loading import import_string
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission

from pipeline_project.api.authentication import request_token

READS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITE_ACTIONS = {"POST": "add", "PUT": "change", "PATCH": "change", "DELETE": "delete"}


def only_reads(request, view) -> bool:
    """A read, or a POST that only reads (its view declares ``post_permission = "view"``)."""
    return request.method in READS or getattr(view, f"{request.method.lower()}_permission", None) == "view"


def operator_action(request, view) -> str | None:
    """The operator's action a request makes (``API_OPERATOR_ACTION_ALLOWED``): its view's ``operator_action``,
    for its writes."""
    return None if only_reads(request, view) else getattr(view, "operator_action", None)


def scopes_accepted(request, view) -> tuple[str, ...]:
    """The token scopes that allow a request, any one of them: ``read`` for a read, ``operate``
    for an operator's action, ``write`` for any other write.

    A call of the seeds' contracts (cancel a job, repair a process) is a daemon's as much as an
    operator's: its view declares ``seed_call = True``, and a token of the default scopes
    (``write``) may make it, as an ``operate`` token may; a staff session still needs the
    action's permission."""
    if only_reads(request, view):
        return ("read",)
    if operator_action(request, view):
        return ("write", "operate") if getattr(view, "seed_call", False) else ("operate",)
    return ("write",)


class ScopeMissing(PermissionDenied):
    """A 403 whose error body's ``details`` name the scope needed and the token's."""

    def __init__(self, message: str, *, details: dict):
        super().__init__(message)
        self.details = details


class IsDaemonOrPermittedStaff(BasePermission):
    """A bearer token whose scopes allow the request (``scopes_accepted``), or a staff member's
    browser session that holds the model permission the request needs, as in the admin: view
    (or change) to read, add, change or delete to write.

    A view names its model in ``permission_model``; a POST that changes rows rather than
    adding them says so with ``post_permission = "change"``. A view that declares its
    ``operator_action`` needs, to write, that action's permission (``API_OPERATOR_ACTION_ALLOWED``), as the
    admin's button does. A view with no model (the schema, the docs, /status) needs a staff
    session only.
    """

    message = "An API token, or a staff session with the permission this request needs, is required."

    def has_permission(self, request, view) -> bool:
        if (token := request_token(request)) is not None:
            accepted = scopes_accepted(request, view)
            if not any(token.allows(scope) for scope in accepted):
                held, needed = ", ".join(token.scopes), " or ".join(accepted)
                raise ScopeMissing(
                    f"This token's scopes ({held}) do not include {needed}, which this request needs.",
                    details={"scopes_accepted": list(accepted), "token_scopes": list(token.scopes)},
                )
            return True
        user = request.user
        if not (user and user.is_authenticated and user.is_staff):
            return False
        if action := operator_action(request, view):
            return import_string(settings.API_OPERATOR_ACTION_ALLOWED)(user, action)
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
