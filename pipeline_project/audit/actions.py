"""What operators may do, each action by name with the permission it needs: one registry that the
admin, the /pipeline pages and the API check, that hides the buttons a user may not press, and
that names the audit trail's rows.

Each app registers its own actions from its ``AppConfig.ready()`` with ``register_actions``; an
action name nobody registered fails loudly wherever it is used (``action``).
"""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class OperatorAction:
    name: str  # as the audit trail records it and the views declare it (``operator_action``)
    permission: str  # "app_label.codename"
    object_type: str  # what the action's objects are


# Every registered action by name, in the order registered.
ACTIONS: dict[str, OperatorAction] = {}


def register_actions(*actions: OperatorAction) -> None:
    """Make ``actions`` known; registering one again is harmless, another under its name is an error."""
    for operator_action in actions:
        known = ACTIONS.setdefault(operator_action.name, operator_action)
        if known != operator_action:
            raise ImproperlyConfigured(
                f"Two operator actions are named {operator_action.name!r}: {known}, {operator_action}"
            )


def action(name: str) -> OperatorAction:
    """The registered action named ``name``; a LookupError for a name no app registered."""
    try:
        return ACTIONS[name]
    except KeyError:
        raise LookupError(f"No operator action {name!r} is registered (register_actions in an app's ready())") from None


def action_choices() -> list[tuple[str, str]]:
    """The audit trail's ``action`` choices: every registered action's name."""
    return [(name, name) for name in ACTIONS]


def object_type_choices() -> list[tuple[str, str]]:
    """The audit trail's ``object_type`` choices: what the registered actions act on."""
    return [(name, name) for name in sorted({registered.object_type for registered in ACTIONS.values()})]


def may(user, name: str) -> bool:
    """Whether a (staff) user may perform the operator action named ``name``."""
    permission = action(name).permission
    return bool(user and user.is_active and user.is_staff and user.has_perm(permission))


def permissions_of(user) -> dict[str, bool]:
    """Every action's name with whether the user may perform it, for templates: ``can.job_retry``."""
    return {name.replace(".", "_"): may(user, name) for name in ACTIONS}
