"""What a call raises: the API's one error shape ``{"code", "message", "details"}`` as an
:class:`ApiError` subclass chosen by the status, or :class:`ConnectionFailedError` when no answer
came back (after the retries)."""

import httpx


class PipelineClientError(Exception):
    """Everything this client raises on purpose."""


class ConnectionFailedError(PipelineClientError):
    """The service could not be reached (or stopped answering), every attempt."""


class ApiError(PipelineClientError):
    """An error answer. ``status`` is the HTTP status; ``code``, ``message`` and ``details`` are the body's."""

    def __init__(self, status: int, code: str, message: str, details: dict | None = None):
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def to_json(self) -> dict:
        return {"status": self.status, "code": self.code, "message": self.message, "details": self.details}


class InvalidRequestError(ApiError):
    """400: the request was refused as it is; ``details`` names the fields."""


class AuthError(ApiError):
    """401 (no valid token) or 403 (the token lacks a scope, e.g. ``operate``)."""


class NotFoundError(ApiError):
    """404: no such job, file, stage or route."""


class ConflictError(ApiError):
    """409: an illegal transition, a finished job, an idempotency key naming another job."""


class UnavailableError(ApiError):
    """429 or 503 still, after every retry. ``retry_after`` is the last wait the service asked for."""

    def __init__(self, *args, retry_after: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


_BY_STATUS = {400: InvalidRequestError, 401: AuthError, 403: AuthError, 404: NotFoundError, 409: ConflictError}


def error_of(response: httpx.Response, *, retry_after: float | None = None) -> ApiError:
    """The exception an error answer stands for. A body not in the error shape (a proxy's page)
    keeps its status, with its text as the message."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        code, message, details = body["code"], str(body.get("message", "")), body.get("details") or {}
    else:
        code, message, details = f"http_{response.status_code}", response.text[:500] or response.reason_phrase, {}
    if response.status_code in (429, 503):
        return UnavailableError(response.status_code, code, message, details, retry_after=retry_after)
    kind = _BY_STATUS.get(response.status_code, ApiError)
    return kind(response.status_code, code, message, details)
