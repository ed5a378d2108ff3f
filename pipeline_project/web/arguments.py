"""Arguments can hold secrets: the values of the keys ``settings.SECRET_ARG_KEYS`` names are
masked on every page and API answer for a caller who may not view arguments.

A key is secret when, lowercased and with its separators (``_``, ``-``, ``.``, spaces) taken
out, it contains one of the names treated alike: ``password`` masks ``DB_PASSWORD``,
``db-password`` and ``dbPassword``; ``api_key`` masks ``apiKey`` and ``X-API-Key``. A few
harmless keys are masked with them (``max_tokens``): masking too much is the safe mistake.
A secret key's value is masked whole, whatever it is (text, number, object, null), as one fixed
string: neither its length nor its type shows. Only answers are masked; stored arguments never
change.

Who may view them: a request by an API token with the ``write`` scope (the daemons that enqueue
the arguments in the first place), or a staff member with a permission an app registered with
``viewing_permission_register`` (the queue's ``jobs.view_job_arguments``; superusers have every
permission). Everyone else gets masked values, and may not search by a secret key either: a
containment query naming one would let them guess the value.
"""

import json
import re

from django.conf import settings

from pipeline_project.api.authentication import request_token

MASK = "••••••"
_SEPARATORS = re.compile(r"[\s_.\-]+")
SEARCH_REFUSED = "Searching arguments by a secret key ({keys}) needs the permission to view arguments."
# The permissions ("app_label.codename") any one of which lets a staff member view arguments.
_VIEWING_PERMISSIONS: set[str] = set()


def viewing_permission_register(permission: str) -> None:
    """Let staff members with ``permission`` view arguments unmasked (an app calls it in ``ready()``)."""
    _VIEWING_PERMISSIONS.add(permission)


def _normalized(name: str) -> str:
    return _SEPARATORS.sub("", name.lower())


def _secret_names() -> list[str]:
    # Read on every call: the setting may change (tests, a reload) and the list is short.
    return [name for name in map(_normalized, settings.SECRET_ARG_KEYS) if name]


def is_secret_key(key, names: list[str] | None = None) -> bool:
    """Whether a dict key names a secret (any key that is not text is not one)."""
    if not isinstance(key, str):
        return False
    normalized = _normalized(key)
    return any(name in normalized for name in (_secret_names() if names is None else names))


def arguments_masked(value, names: list[str] | None = None):
    """``value`` (any JSON) with the values of its secret keys, at any depth, replaced by ``MASK``:
    a copy; ``value`` itself is left as it is."""
    names = _secret_names() if names is None else names
    if isinstance(value, dict):
        return {
            key: MASK if is_secret_key(key, names) else arguments_masked(item, names) for key, item in value.items()
        }
    if isinstance(value, list):
        return [arguments_masked(item, names) for item in value]
    return value


def secret_keys_in(value, names: list[str] | None = None) -> list[str]:
    """The secret keys ``value`` (any JSON, e.g. a containment query) names, at any depth."""
    names = _secret_names() if names is None else names
    if isinstance(value, dict):
        found = [key for key in value if is_secret_key(key, names)]
        return found + [key for item in value.values() for key in secret_keys_in(item, names)]
    if isinstance(value, list):
        return [key for item in value for key in secret_keys_in(item, names)]
    return []


# A secret value shorter than this is not looked for in texts: "1" or "ab" would mask half a traceback.
SECRET_VALUE_MIN_CHARS = 4


def secret_values(value, names: list[str] | None = None) -> set[str]:
    """The texts under ``value``'s secret keys, at any depth (those of at least SECRET_VALUE_MIN_CHARS)."""
    names = _secret_names() if names is None else names
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if is_secret_key(key, names):
                found |= {text for text in _texts(item) if len(text) >= SECRET_VALUE_MIN_CHARS}
            else:
                found |= secret_values(item, names)
    elif isinstance(value, list):
        for item in value:
            found |= secret_values(item, names)
    return found


def _texts(value) -> list[str]:
    if isinstance(value, dict | list):
        return [text for item in (value.values() if isinstance(value, dict) else value) for text in _texts(item)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def text_without_secrets(text: str, secrets: set[str]) -> str:
    """``text`` with each of ``secrets`` (the args' secret values) replaced by MASK, the longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def arguments_masked_text(value) -> str:
    """``value`` masked, as JSON text: how an admin page shows arguments it may not show whole."""
    return json.dumps(arguments_masked(value), ensure_ascii=False)


def may_view_arguments(request) -> bool:
    """Whether the request's caller sees arguments unmasked: a token with the ``write`` scope, or a
    staff member with a registered viewing permission. Takes a Django HttpRequest or a DRF Request."""
    if request is None:
        return False
    if (token := request_token(request)) is not None:
        return token.allows("write")
    user = getattr(request, "user", None)
    return bool(user and user.is_active and user.is_staff and any(map(user.has_perm, sorted(_VIEWING_PERMISSIONS))))


def arguments_shown(value, *, request):
    """``value`` as the request's caller may see it."""
    return value if may_view_arguments(request) else arguments_masked(value)


def search_refusal(value, *, request) -> str | None:
    """Why an arguments search for ``value`` is refused to the request's caller, or None: a
    caller who may not view arguments may not name a secret key in it."""
    keys = secret_keys_in(value)
    if not keys or may_view_arguments(request):
        return None
    return SEARCH_REFUSED.format(keys=", ".join(sorted(set(keys))))
