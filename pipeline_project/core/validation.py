"""The API views' first step: validate a request body or query string with a serializer."""


def validated(serializer_class, data) -> dict:
    """``serializer_class(data=data)``'s validated data; a ValidationError (400) otherwise."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
