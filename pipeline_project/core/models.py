import hashlib

from django.conf import settings
from django.db import models


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

    class Meta:
        db_table = "api_tokens"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @staticmethod
    def hash_key(key: str) -> str:
        # Tokens are 256 random bits, so a fast hash is enough to make a stolen table useless.
        return hashlib.sha256(key.encode()).hexdigest()
