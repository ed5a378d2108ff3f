"""OpenAPI: the bearer-token authentication, and every error an operation can answer.

drf-spectacular documents the success responses views declare; the hook below adds the
errors that follow from an operation's shape, all in the one error shape: 401 and 403 where
authentication is needed, 400 where there is a body or parameters to validate, 413 and 415
where there is a body, 404 where the path names something. Views declare the rest
(409 conflicts, a 404 for a name in a body) with ``error_responses``.
"""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

ERROR_SCHEMA = {
    "type": "object",
    "description": "The one error shape of the API.",
    "properties": {
        "code": {"type": "string", "description": "A stable, machine-readable code, e.g. validation_error."},
        "message": {"type": "string", "description": "What went wrong, for a person."},
        "details": {"type": "object", "additionalProperties": True, "description": "Fields and values involved."},
    },
    "required": ["code", "message", "details"],
}
_DESCRIPTIONS = {
    400: "The request is invalid (details name the fields).",
    401: "No valid API token or session.",
    403: "The caller may not do this.",
    404: "Not found.",
    409: "Conflicts with the current state.",
    413: "The body is too large.",
    415: "The body is not JSON.",
}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "pipeline_project.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A token from `manage.py apitoken create`."}


class ErrorSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField()


def error_responses(**descriptions: str) -> dict:
    """``extend_schema(responses={...})`` entries for errors a view raises itself: ``error_responses(409="...")``."""
    return {int(status): OpenApiResponse(ErrorSerializer, description=text) for status, text in descriptions.items()}


def document_error_responses(result, generator, request, public):
    """Postprocessing hook: the errors each operation can answer, with the error schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            statuses = set()
            if operation.get("security") and {} not in operation["security"]:
                statuses |= {401, 403}
            if "requestBody" in operation:
                statuses |= {400, 413, 415}
            parameters = operation.get("parameters", [])
            if parameters:  # query, header and path parameters are validated
                statuses.add(400)
            if any(parameter["in"] == "path" for parameter in parameters):
                statuses.add(404)
            responses = operation.setdefault("responses", {})
            for status in sorted(statuses):
                responses.setdefault(str(status), {"description": _DESCRIPTIONS[status]})
            for status, response in responses.items():
                if int(status) >= 400:
                    response["content"] = error
    return result
