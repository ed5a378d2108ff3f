"""What an error answer on the API's paths must look like, for the tests that check many of them."""

import json

SQLRS_PREFIX = "/sqlrs/"
# The security headers Django's middleware add to every answer (HSTS only with HTTPS=1).
SECURITY_HEADERS = ("X-Content-Type-Options", "Referrer-Policy", "Cross-Origin-Opener-Policy", "X-Frame-Options")


def error_problem(path: str, status: int, content_type: str, body: bytes) -> str | None:
    """Why an error answer on ``path`` is not JSON in the path's error shape, or None.

    The project's shape is ``{"code", "message", "details": {...}}``; sqlrs's ErrorResponse
    (under /sqlrs/) is ``{"code", "message"[, "details"]}`` with details as text.
    """
    if content_type.split(";")[0].strip().lower() != "application/json":
        return f"{status} answered {content_type or 'no content type'}: {body[:120]!r}"
    try:
        document = json.loads(body)
    except ValueError:
        return f"{status} answered a body that is not JSON: {body[:120]!r}"
    if not isinstance(document, dict):
        return f"{status} answered {type(document).__name__}, not an object: {body[:120]!r}"
    sqlrs = path == SQLRS_PREFIX.rstrip("/") or path.startswith(SQLRS_PREFIX)
    keys = set(document)
    if sqlrs and not {"code", "message"} <= keys <= {"code", "message", "details"}:
        return f"{status}: sqlrs's ErrorResponse has code, message and details only: {sorted(keys)}"
    if not sqlrs and keys != {"code", "message", "details"}:
        return f"{status}: the error shape is code, message, details: {sorted(keys)}"
    if not (isinstance(document["code"], str) and document["code"] and isinstance(document["message"], str)):
        return f"{status}: code and message must be text: {body[:120]!r}"
    if "details" in document and not isinstance(document["details"], str if sqlrs else dict):
        return f"{status}: details must be {'text' if sqlrs else 'an object'}: {body[:120]!r}"
    return None


def assert_error_shape(response, path: str | None = None) -> dict:
    """Assert a Django test response is an error in its path's shape; return its body."""
    path = path or response.wsgi_request.path
    problem = error_problem(path, response.status_code, response.get("Content-Type", ""), response.content)
    assert problem is None, f"{path}: {problem}"
    return json.loads(response.content)


def missing_security_headers(headers) -> list[str]:
    present = {name.lower() for name in headers}
    return [name for name in (*SECURITY_HEADERS, "X-Request-ID") if name.lower() not in present]
