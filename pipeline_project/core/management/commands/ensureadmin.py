import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

PASSWORD_FILE = settings.VAR_DIR / "admin_password"


class Command(BaseCommand):
    help = (
        "Make sure an admin login exists. The password is ADMIN_PASSWORD if set (applied every run); "
        "otherwise a new admin gets a random password, printed and saved to var/admin_password."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        password = os.environ.get("ADMIN_PASSWORD")
        if user is None:
            password = password or secrets.token_urlsafe(12)
            User.objects.create_superuser(username=username, email="", password=password)
            if not os.environ.get("ADMIN_PASSWORD"):
                PASSWORD_FILE.parent.mkdir(parents=True, exist_ok=True)
                PASSWORD_FILE.touch(mode=0o600)
                PASSWORD_FILE.write_text(password + "\n")
            self.stdout.write(f"Admin login created: {username} / {password}")
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(f"Admin login {username}: password set from ADMIN_PASSWORD.")
        else:
            where = f"see {PASSWORD_FILE}" if PASSWORD_FILE.exists() else "unchanged"
            self.stdout.write(f"Admin login {username} exists; password {where}.")
