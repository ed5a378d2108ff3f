"""sqlrs routes answer errors as sqlrs's ErrorResponse: ``{code, message[, details]}``, details
as text. The project's error handler builds the body; this one only reshapes it."""

import json

from pipeline_project.core.errors import api_exception_handler

# sqlrs's codes for DRF's own errors.
CODES = {
    "not_authenticated": "unauthorized",
    "authentication_failed": "unauthorized",
    "permission_denied": "forbidden",
    "parse_error": "invalid_argument",
    "validation_error": "invalid_argument",
    "invalid": "invalid_argument",
    "unsupported_media_type": "invalid_argument",
}


def sqlrs_error(code: str, message: str, details=None) -> dict:
    body = {"code": CODES.get(code, code), "message": message}
    if details:
        body["details"] = details if isinstance(details, str) else json.dumps(details, sort_keys=True)
    return body


def sqlrs_exception_handler(exc, context):
    response = api_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "code" in response.data:
        response.data = sqlrs_error(response.data["code"], response.data["message"], response.data.get("details"))
    return response
