"""State changes for API tokens."""

import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.core import selectors
from pipeline_project.core.models import SCOPES, ApiToken, default_scopes

# last_used_at is advisory; writing it on every request would double the API's writes.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_token_create(*, name: str, scopes: list[str] | None = None, created_by=None) -> tuple[ApiToken, str]:
    """Create a token and return it with its plaintext key, which is never stored. ``scopes``:
    some of read, write, operate (``API_TOKEN_DEFAULT_SCOPES`` when not given)."""
    asked = default_scopes() if scopes is None else list(scopes)
    unknown = sorted(set(asked) - set(SCOPES))
    if not asked or unknown:
        raise InvalidInputError(
            f"A token needs one or more of the scopes {', '.join(SCOPES)}.", details={"scopes": unknown}
        )
    scopes = [scope for scope in SCOPES if scope in asked]  # each once, in a fixed order
    key = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        name=name, key_prefix=key[:12], key_hash=ApiToken.hash_key(key), scopes=scopes, created_by=created_by
    )
    return token, key


@transaction.atomic
def api_token_revoke(*, token_id: int) -> ApiToken:
    token = ApiToken.objects.select_for_update().filter(pk=token_id).first()
    if token is None:
        raise NotFoundError(f"No API token with id {token_id}.")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def api_token_mark_used(*, token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """The live token whose key is ``key``, marked used; None for an unknown or revoked key
    (``settings.API_TOKEN_AUTHENTICATE``: the API's bearer authentication calls it)."""
    token = selectors.api_token_by_key(key=key)
    if token is not None:
        api_token_mark_used(token=token)
    return token
