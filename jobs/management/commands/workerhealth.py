import socket

from django.core.management.base import BaseCommand, CommandError

from jobs import selectors


class Command(BaseCommand):
    help = (
        "Exit 0 if a runworker on this host (a container: its hostname) heartbeated within three "
        "heartbeat periods, 1 otherwise: a health check for worker containers."
    )

    def handle(self, *args, **options):
        hostname = socket.gethostname()
        alive = [worker for worker in selectors.live_workers() if worker.hostname == hostname]
        if not alive:
            raise CommandError(f"no live runworker on {hostname}")
        self.stdout.write(f"{len(alive)} live runworker(s) on {hostname}")
