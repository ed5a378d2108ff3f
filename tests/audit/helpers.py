from pipeline_project.audit.models import AuditEntry


def only_entry(**match) -> AuditEntry:
    """The one audit entry recorded, checked to match ``match``."""
    entries = list(AuditEntry.objects.all())
    assert len(entries) == 1, [(entry.action, entry.object_ids) for entry in entries]
    entry = entries[0]
    assert {name: getattr(entry, name) for name in match} == match
    return entry
