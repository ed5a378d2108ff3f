"""The base of every request serializer (a body or a query string), and the two every API shares."""

from django.http import QueryDict
from rest_framework import serializers

from pipeline_project.api.fields import QueryIntegerField


class RequestSerializer(serializers.Serializer):
    """Refuses fields it does not declare (400 naming them), so a typo is heard, not ignored; and,
    in a query string, a parameter given twice that takes one value (DRF would keep the last)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            problems = {name: ["Unknown field."] for name in sorted(set(data) - set(self.fields))}
            if isinstance(data, QueryDict):
                problems |= {
                    name: ["Given more than once; this parameter takes one value."]
                    for name in sorted(data)
                    if name in self.fields and len(data.getlist(name)) > 1 and not _takes_many(self.fields[name])
                }
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


def _takes_many(field) -> bool:
    return isinstance(field, serializers.ListField | serializers.MultipleChoiceField)


class NoParameters(RequestSerializer):
    """The query string (or body) of a request that takes none: empty (a body may be ``{}``)."""


class PageQuery(RequestSerializer):
    """A cursor-paginated list's query string: the paginator's parameters (it reads them itself;
    declared so that they are not refused). A list's filters are declared beside them."""

    PAGINATION = ("cursor", "limit")

    cursor = serializers.CharField(required=False)
    limit = QueryIntegerField(required=False, min_value=1)
