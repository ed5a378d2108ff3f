from django.core.management.base import BaseCommand, CommandError

from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.core import services
from pipeline_project.core.models import SCOPES, ApiToken


class Command(BaseCommand):
    help = "Create, list or revoke API bearer tokens (one per daemon)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token and print it once.")
        create.add_argument("name", help="The daemon the token is for, e.g. shard-worker-1.")
        create.add_argument(
            "--scope",
            action="append",
            choices=SCOPES,
            dest="scopes",
            help="What it may do, once per scope (default: API_TOKEN_DEFAULT_SCOPES, read and write): "
            "read (GET), write (what daemons do: every seed call), operate (by filter, delete, pause, limits).",
        )
        sub.add_parser("list", help="List tokens (never their keys).")
        revoke = sub.add_parser("revoke", help="Revoke a token by id.")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args, action, **options):
        if action == "create":
            try:
                token, key = services.api_token_create(name=options["name"], scopes=options["scopes"])
            except InvalidInputError as exc:
                raise CommandError(exc.message) from None
            scopes = ", ".join(token.scopes)
            self.stderr.write(f"Created token {token.pk} for {token.name!r} ({scopes}); it is shown only now:")
            self.stdout.write(key)
        elif action == "list":
            for token in ApiToken.objects.all():
                state = "revoked" if token.revoked_at else "active"
                self.stdout.write(
                    f"{token.pk}\t{token.name}\t{token.key_prefix}…\t{','.join(token.scopes)}\t{state}"
                    f"\tlast used {token.last_used_at}"
                )
        else:
            try:
                token = services.api_token_revoke(token_id=options["token_id"])
            except NotFoundError as exc:
                raise CommandError(exc.message) from None
            self.stdout.write(f"Revoked token {token.pk} ({token.name}).")
