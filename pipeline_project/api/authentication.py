"""``Authorization: Bearer <token>`` for daemons.

The tokens are an app's (``pipeline_project.core``): ``settings.API_TOKEN_MODEL`` names their
model, ``settings.API_TOKEN_AUTHENTICATE`` the function that takes a key and gives back its live
token, marked used, or None. A token has a ``name``, its ``scopes`` and ``allows(scope)``.
"""

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import import_string
from rest_framework import authentication, exceptions


class TokenPrincipal:
    """The ``request.user`` of a token-authenticated request: a daemon, not a Django user."""

    is_authenticated = True
    is_anonymous = False
    is_staff = False
    is_superuser = False

    def __init__(self, token):
        self.token = token
        self.username = f"token:{token.name}"
        self.pk = None

    def __str__(self) -> str:
        return self.username


def request_token(request):
    """The API token (``settings.API_TOKEN_MODEL``) a request was authenticated with, DRF's
    ``request.auth``; None for a staff session, a Django request, no request."""
    token = getattr(request, "auth", None)
    return token if isinstance(token, apps.get_model(settings.API_TOKEN_MODEL)) else None


def request_caller(request) -> str:
    """Who is asking: the token's daemon name or the staff member's username."""
    if isinstance(request.user, TokenPrincipal):
        return request.user.token.name
    return request.user.get_username()


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header:
            return None  # not ours: let session authentication try
        if header[0].lower() != self.keyword.lower().encode():
            scheme = header[0].decode("latin-1")[:20]
            raise exceptions.AuthenticationFailed(
                f"The {scheme!r} scheme is not accepted: send 'Authorization: Bearer <token>'."
            )
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        try:
            key = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Token contains invalid characters.") from None
        token = import_string(settings.API_TOKEN_AUTHENTICATE)(key=key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return TokenPrincipal(token), token

    def authenticate_header(self, request):
        return self.keyword
