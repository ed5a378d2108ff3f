"""Columns and expressions the seeds' DDL spells its own way: PostgreSQL enums, ``bigserial``,
``now()`` defaults, and equality spelled for one partial index only."""

from django.core.exceptions import ValidationError
from django.db import models


class TransactionNow(models.Func):
    """``now()``: the seed's defaults use the transaction's timestamp."""

    template = "now()"
    output_field = models.DateTimeField()


class NotDistinctFrom(models.Func):
    """``a IS NOT DISTINCT FROM b``: for a column that is never NULL, ``a = b`` spelled so that only
    a partial index whose predicate is spelled the same serves it (not one on ``a``, nor one whose
    predicate is ``a = b``)."""

    arg_joiner = " IS NOT DISTINCT FROM "
    template = "(%(expressions)s)"
    output_field = models.BooleanField()


class PgEnumField(models.TextField):
    """A column of a PostgreSQL enum type (created by the migration)."""

    def __init__(self, *args, enum_type: str, **kwargs):
        self.enum_type = enum_type
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        return name, path, args, {**kwargs, "enum_type": self.enum_type}

    def db_type(self, connection):
        return self.enum_type

    def get_prep_value(self, value):
        # PostgreSQL refuses a value outside the enum with an error; refuse it before SQL, as a
        # validation error the admin's filters turn into their "invalid filter" page.
        value = super().get_prep_value(value)
        if value is not None and self.choices and value not in {choice for choice, _label in self.choices}:
            raise ValidationError(f"{value!r} is not a {self.enum_type}.", code="invalid_choice")
        return value


class BigSerialField(models.BigAutoField):
    """``bigserial`` as in the seed, instead of Django's identity column."""

    def db_type(self, connection):
        return "bigserial"

    def db_type_suffix(self, connection):
        return None
