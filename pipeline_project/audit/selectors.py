from pipeline_project.audit.models import AuditEntry

SHOWN_ON_A_PAGE = 20


def audit_entries_for(*, object_type: str, object_id) -> list[AuditEntry]:
    """The latest actions that named this object (the GIN index on ``object_ids``)."""
    return list(
        AuditEntry.objects.filter(object_type=object_type, object_ids__contains=[str(object_id)]).order_by("-id")[
            :SHOWN_ON_A_PAGE
        ]
    )
