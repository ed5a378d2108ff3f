import json

from django.core.management.base import BaseCommand

from pipeline_project.core.selectors import COUNTS_SAMPLE_ROWS
from pipeline_project.db.counts import KEPT


class Command(BaseCommand):
    help = (
        "Rebuild the counts the triggers keep (jobs per queue, task and status; processes per namespace "
        "and status; tracking rows per shard and stage statuses) from their tables, after a load that "
        "skipped the triggers (pg_restore --disable-triggers, logical replication, "
        "session_replication_role = replica). Online and idempotent: run it while the service works, "
        "as often as you like. --check only says which disagree (as /status does)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="say which counts disagree; change nothing")
        parser.add_argument("--counts", choices=[counts.counts_table for counts in KEPT], help="only this one")

    def handle(self, *args, check, counts, **options):
        for kept in KEPT:
            if counts in (None, kept.counts_table):
                if check:
                    answer = {
                        "counts": kept.counts_table,
                        "disagreement": kept.disagreement(sample_rows=COUNTS_SAMPLE_ROWS),
                    }
                else:
                    answer = kept.rebuild()
                self.stdout.write(json.dumps(answer, default=str))
