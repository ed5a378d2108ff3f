"""The demo's tracked files (pipeline database): registered at different points of the four
stages, then moved on a step at a time by the demo schedule's task, through tracking's own
services, as daemons would move them over the API."""

from pipeline_project.api.errors import ConflictError
from pipeline_project.demo.config import TRACKING_FILES, TRACKING_SHARDS
from tracking import selectors, services
from tracking.selectors import QUEUE_STAGES, Status

# Transitions given to each shard of each file when it is first registered: the first file goes
# all the way, the second part of the way (one shard fails: the admin's retry action has work),
# the third is just registered (event-ingest started).
START_STEPS = {0: {0: 6, 1: 6, 2: 6}, 1: {0: 4, 1: 3, 2: 2}, 2: {}}
FAILED_AT_START = {(1, 2): "shard-worker"}
ROWS_PER_TICK = 3


def demo_rows():
    return selectors.rows_of_files(filenames=TRACKING_FILES)


def tracking_install() -> int:
    """Register the demo's files that are not registered yet (a file that is keeps its stages,
    wherever the schedule moved them); how many rows were created."""
    created = 0
    for number, filename in enumerate(TRACKING_FILES):
        registration = services.file_register(filename=filename, shards=list(TRACKING_SHARDS))
        if not registration.created_shards:
            continue
        created += len(registration.created_shards)
        if START_STEPS[number]:
            services.event_ingest_mark_done(filename=filename)
        for shard, steps in START_STEPS[number].items():
            for _step in range(steps):
                _step_row(filename, shard)
            if (failed_stage := FAILED_AT_START.get((number, shard))) is not None:
                services.stage_transition(
                    stage=QUEUE_STAGES[failed_stage], transition="fail", filename=filename, shard=shard
                )
    return created


def _step_row(filename: str, shard: int) -> str | None:
    """The row's next transition (start a new stage, finish a started one); None when it is
    done, failed (an operator retries it) or waits for event-ingest."""
    row = demo_rows().filter(filename=filename, shard=shard).values(*(s.column for s in QUEUE_STAGES.values())).first()
    if row is None:
        return None
    for stage in QUEUE_STAGES.values():
        status = row[stage.column]
        if status == Status.DONE:
            continue
        if status == Status.FAILED:
            return None
        transition = "start" if status == Status.NEW else "done"
        try:
            services.stage_transition(stage=stage, transition=transition, filename=filename, shard=shard)
        except ConflictError:  # the previous stage is not done (event-ingest still running)
            return None
        return f"{filename}/{shard} {stage.slug} {transition}"
    return None


def tracking_advance() -> dict:
    """One tick: finish a started event-ingest, then move up to ROWS_PER_TICK rows a step on."""
    moved = []
    started = demo_rows().filter(event_ingest_status=Status.STARTED).order_by("filename").first()
    if started is not None:
        services.event_ingest_mark_done(filename=started.filename)
        moved.append(f"{started.filename} event-ingest done")
    for filename, shard in demo_rows().order_by("filename", "shard").values_list("filename", "shard"):
        if len(moved) >= ROWS_PER_TICK:
            break
        if (step := _step_row(filename, shard)) is not None:
            moved.append(step)
    return {"moved": moved}


def tracking_remove() -> int:
    """Delete the demo's rows (their stage history goes with them: ON DELETE CASCADE)."""
    return services.files_delete(filenames=TRACKING_FILES)
