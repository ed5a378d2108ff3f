"""The API's one paging scheme for its cursor lists: ``limit`` (the page's size) and ``cursor``
(the ``next`` or ``previous`` link of the page before). A tampered or malformed cursor is a 400,
not a 404 or a 500; a limit beyond the list's maximum is a 400 naming it (DRF would cap it quietly).

Seed 000's queues (``/api/v1/pipeline/queues/{stage}``) take the seed's ``limit`` and ``offset``.
"""

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

from pipeline_project.api.fields import QueryIntegerField


class StrictCursorPagination(CursorPagination):
    """``position_is_valid`` says whether a decoded cursor's position can be compared with the
    ordering field (DRF would hand anything to the database)."""

    page_size_query_param = "limit"

    def position_is_valid(self, position: str) -> bool:
        raise NotImplementedError

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:  # DRF's answer to a cursor it cannot decode
            raise ValidationError({self.cursor_query_param: ["Invalid cursor."]}) from None
        if cursor is not None and cursor.position is not None and not self.position_is_valid(cursor.position):
            raise ValidationError({self.cursor_query_param: ["Invalid cursor."]})
        return cursor

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        field = QueryIntegerField(min_value=1, max_value=self.max_page_size)
        try:
            return field.run_validation(raw)
        except ValidationError as refused:
            raise ValidationError({self.page_size_query_param: refused.detail}) from None

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = (
                    f"The page's size: {self.page_size} unless given, at most {self.max_page_size}."
                )
                parameter["schema"] |= {"minimum": 1, "maximum": self.max_page_size}
        return parameters
