"""Secret arguments in the API: the field that masks them in answers, and the refusal of a
search that names one (the rule itself: ``pipeline_project.web.arguments``)."""

from rest_framework import serializers

from pipeline_project.api.errors import InvalidInputError
from pipeline_project.web.arguments import arguments_shown, search_refusal


def refuse_secret_search(value, *, request, field: str = "args") -> None:
    """For the API: a 400 (``InvalidInputError``) when ``search_refusal`` refuses the search."""
    if problem := search_refusal(value, request=request):
        raise InvalidInputError(problem, details={field: [problem]})


ARGUMENTS_HELP = (
    "The values of secret keys (SECRET_ARG_KEYS, e.g. password, token) are masked unless the caller "
    "may view arguments (a token with the write scope, or jobs.view_job_arguments)."
)


class ArgumentsField(serializers.JSONField):
    """Arguments in an answer: masked unless the serializer's ``request`` (its context) may view
    them; masked when it has none."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", ARGUMENTS_HELP)
        super().__init__(**kwargs)

    def to_representation(self, value):
        return arguments_shown(super().to_representation(value), request=self.context.get("request"))
