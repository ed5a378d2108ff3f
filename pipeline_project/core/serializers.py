"""The base of every request-body serializer."""

from rest_framework import serializers


class RequestSerializer(serializers.Serializer):
    """Refuses fields it does not declare (400 naming them), so a typo is heard, not ignored."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)
