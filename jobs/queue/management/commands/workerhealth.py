import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.queue import selectors


class Command(BaseCommand):
    help = (
        "Exit 0 if a runworker on this host (a container: its hostname) heartbeated within three "
        "heartbeat periods, 1 otherwise: a health check for worker containers. With --reaper, whether "
        "this host's runreaper passed over its tasks within REAPER_ALIVE_WITHIN_SEC."
    )

    def add_arguments(self, parser):
        parser.add_argument("--reaper", action="store_true", help="Check this host's runreaper instead.")

    def handle(self, *args, reaper=False, **options):
        if reaper:
            self._reaper_health()
            return
        hostname = socket.gethostname()
        alive = [worker for worker in selectors.live_workers() if worker.hostname == hostname]
        if not alive:
            raise CommandError(f"no live runworker on {hostname}")
        self.stdout.write(f"{len(alive)} live runworker(s) on {hostname}")

    def _reaper_health(self):
        path = settings.REAPER_ALIVE_FILE
        try:
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            raise CommandError(f"no runreaper has run here ({path} is missing)") from None
        if age > settings.REAPER_ALIVE_WITHIN_SEC:
            raise CommandError(f"runreaper's last pass was {age:.0f} s ago ({path})")
        self.stdout.write(f"runreaper passed over its tasks {age:.0f} s ago")
