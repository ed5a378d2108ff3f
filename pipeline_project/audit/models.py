from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models.functions import Now

from pipeline_project.audit.actions import action_choices, object_type_choices

VIA = [("admin", "admin"), ("pipeline", "/pipeline pages"), ("api", "API")]


class AuditEntry(models.Model):
    """One operator action: who, what, on which objects (or which filter, and how many), when,
    from where. Written in the action's own transaction; never changed afterwards."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(db_default=Now())
    actor = models.CharField(max_length=200, help_text="The user's name, or token:<name> for an API token.")
    via = models.CharField(max_length=10, choices=VIA)
    address = models.GenericIPAddressField(null=True, blank=True, help_text="The client's address.")
    # Choices (what the apps registered, read when asked), so that the admin's filter lists them
    # instead of reading every row for distinct values.
    action = models.CharField(max_length=40, choices=action_choices)
    object_type = models.CharField(max_length=40, choices=object_type_choices)
    object_ids = ArrayField(
        models.TextField(), default=list, blank=True, help_text="The objects named (first ones of a long list)."
    )
    filter = models.JSONField(null=True, blank=True, help_text="The filter a bulk action matched, as given.")
    count = models.BigIntegerField(null=True, blank=True, help_text="How many objects the action changed.")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "audit_entries"
        verbose_name = "audit entry"
        verbose_name_plural = "audit trail"
        ordering = ["-id"]
        indexes = [
            GinIndex(fields=["object_ids"], name="audit_entries_object_ids"),
            models.Index(fields=["action", "-id"], name="audit_entries_action"),
            models.Index(fields=["actor", "-id"], name="audit_entries_actor"),
            models.Index(fields=["via", "-id"], name="audit_entries_via"),
            models.Index(fields=["object_type", "-id"], name="audit_entries_object_type"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} at {self.at:%Y-%m-%d %H:%M:%S}"
