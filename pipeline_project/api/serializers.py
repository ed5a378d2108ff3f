"""The base of every request serializer (a body or a query string), and the two every API shares."""

from rest_framework import serializers

from pipeline_project.api.fields import QueryIntegerField


class RequestSerializer(serializers.Serializer):
    """Refuses fields it does not declare (400 naming them), so a typo is heard, not ignored."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class NoParameters(RequestSerializer):
    """The query string (or body) of a request that takes none: empty (a body may be ``{}``)."""


class PageQuery(RequestSerializer):
    """A cursor-paginated list's query string: the paginator's parameters (it reads them itself;
    declared so that they are not refused). A list's filters are declared beside them."""

    PAGINATION = ("cursor", "page_size")

    cursor = serializers.CharField(required=False)
    page_size = QueryIntegerField(required=False, min_value=1)
