"""Model constraints shared by the apps."""

from django.db import models


def one_of(field: str, choices: type[models.TextChoices], table: str, *, null: bool = False) -> models.CheckConstraint:
    """CHECK that ``field`` holds one of ``choices`` (enums as CHECKs: new values need no type change)."""
    condition = models.Q(**{f"{field}__in": choices.values})
    if null:
        condition |= models.Q(**{f"{field}__isnull": True})
    return models.CheckConstraint(condition=condition, name=f"{table}_{field}_valid")
