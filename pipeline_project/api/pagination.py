"""Cursor pagination that answers a tampered or malformed cursor with a 400, not a 404 or a 500."""

import re

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

_PAGE_SIZE = re.compile(r"[0-9]{1,9}")


class StrictCursorPagination(CursorPagination):
    """``position_is_valid`` says whether a decoded cursor's position can be compared with the
    ordering field (DRF would hand anything to the database)."""

    page_size_query_param = "page_size"

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
        # DRF quietly ignores a page_size it cannot parse; a caller with a typo should hear about it.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (_PAGE_SIZE.fullmatch(raw) and int(raw) > 0):
            raise ValidationError({self.page_size_query_param: ["A positive integer is required."]})
        return super().get_page_size(request)
