import hashlib

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

# What a token may do. read: every GET; write: what daemons do (register files, move stages,
# enqueue jobs, start runs, drive processes, the sqlrs engine's API); operate: what operators do
# (retry, cancel, delete, pause and resume, change limits, run a schedule now, repair a process).
SCOPES = ("read", "write", "operate")


def default_scopes() -> list[str]:
    return list(settings.API_TOKEN_DEFAULT_SCOPES)


class ApiToken(models.Model):
    """A bearer token for one daemon. Only the SHA-256 of the token is stored."""

    PREFIX = "pcp_"

    name = models.CharField(max_length=100, help_text="The daemon or person this token belongs to.")
    key_prefix = models.CharField(max_length=16, editable=False, help_text="First characters, to recognise a token.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    scopes = ArrayField(
        models.TextField(choices=[(scope, scope) for scope in SCOPES]),
        default=default_scopes,
        help_text="What the token may do: read (GET), write (what daemons do), operate (operators' actions).",
    )

    class Meta:
        db_table = "api_tokens"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(scopes__contained_by=list(SCOPES), scopes__len__gt=0), name="api_tokens_scopes_known"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    @staticmethod
    def hash_key(key: str) -> str:
        # Tokens are 256 random bits, so a fast hash is enough to make a stolen table useless.
        return hashlib.sha256(key.encode()).hexdigest()
