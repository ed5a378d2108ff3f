"""The one way an API handler declares its request: ``@accepts(query=..., body=...)``.

Every API view inherits :class:`DeclaredRequestMixin`, which refuses, when the class is defined,
a handler that does not declare its request, and validates the request as the handler declares
it once the request's checks (token, permissions, throttles) have passed, in ``initial``. What a
handler does not declare it does not take: a query parameter (or a body field) is then refused
with a 400 naming it, as a typo should be.
"""

import functools
from inspect import iscoroutinefunction

from rest_framework.request import Request

from pipeline_project.api.serializers import NoParameters

HANDLERS = ("get", "post", "put", "patch", "delete")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def accepts(*, query=None, body=None):
    """A handler's request: its query string's serializer (``query``) and, for a method with a
    body, its body's (``body``); left out, the request takes none (:class:`NoParameters`).

    A sync handler is called with the validated data it declares as ``query=`` and ``body=``. An
    async handler reads them from ``self.accepted`` once its view's checks have run: adrf runs
    them before the handler, an async view that runs them in its own first hop to a thread
    (``jobs.processes.api``) after that hop.
    """

    def declare(handler):
        if iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def declared(view, request, *args, **kwargs):
                return await handler(view, request, *args, **kwargs)

        else:

            @functools.wraps(handler)
            def declared(view, request, *args, **kwargs):
                return handler(view, request, *args, **view.accepted, **kwargs)

        declared.accepts = (query, body)
        return declared

    return declare


def validated(serializer_class, data, **context) -> dict:
    """``serializer_class(data=data)``'s validated data; a ValidationError (400) otherwise."""
    serializer = serializer_class(data=data, context=context)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _validated_or_none_given(serializer_class, data, request) -> dict:
    if serializer_class is NoParameters and isinstance(data, dict) and not data:
        return {}  # nothing to take and nothing given: no serializer on every plain request
    return validated(serializer_class, data, request=request)


def accepted(request: Request, *, query=None, body=None) -> dict:
    """The request as declared: ``query`` and ``body`` (those declared) validated, with the
    request in their context (a header may stand for a parameter); an undeclared query string,
    or body of a method that has one, must be empty."""
    given = {}
    query_data = _validated_or_none_given(query or NoParameters, request.query_params, request)
    if query:
        given["query"] = query_data
    if request.method in BODY_METHODS:
        body_data = _validated_or_none_given(body or NoParameters, request.data, request)
        if body:
            given["body"] = body_data
    return given


class DeclaredRequestMixin:
    # No handler without its @accepts; the request validated as its handler declares, after the
    # request's checks. (No docstring: the schema would take it for every view's description.)

    accepted: dict  # what the handler takes, by name: query, body

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in HANDLERS:
            handler = getattr(cls, name, None)
            if handler is not None and not hasattr(handler, "accepts"):
                raise TypeError(f"{cls.__name__}.{name} does not declare its request (@accepts)")

    def _allowed_methods(self):
        # OPTIONS answers 405 (no DRF self-description: the schema is it), so Allow does not list it.
        return [method for method in super()._allowed_methods() if method != "OPTIONS"]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        method = request.method.lower()
        handler = getattr(self, method, None) if method in self.http_method_names else None
        declared = getattr(handler, "accepts", None)
        self.accepted = accepted(request, query=declared[0], body=declared[1]) if declared else {}
