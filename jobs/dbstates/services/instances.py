"""State changes of instances: created once their server runs, their server started again when
it is gone (deletion: ``deletions``)."""

from pathlib import Path

from django.db import transaction

from jobs.dbstates.engine import images, postgres
from jobs.dbstates.models import Instance, InstanceStatus
from pipeline_project.api.errors import NotFoundError


def instance_create(
    *, instance_id: str, state_id: str, image: images.Image, job_id: str | None, server: postgres.Server, data_dir: Path
) -> Instance:
    """The row of an instance whose copy of the state is made and whose server runs."""
    with transaction.atomic():
        return Instance.objects.create(
            instance_id=instance_id,
            state_id=state_id,
            image_id=image.resolved_id,
            job_id=job_id,
            port=server.port,
            pid=server.pid,
            runtime_dir=str(data_dir),
        )


def instance_server_ensure(*, instance_id: str) -> tuple[postgres.Server, list[str]]:
    """The instance's running server; if it is gone, started again from its runtime directory,
    with its new port and pid recorded (under the instance's row lock). Returns (server, recovery
    messages)."""
    with transaction.atomic():
        instance = Instance.objects.select_for_update().filter(instance_id=instance_id).first()
        if instance is None or instance.status != InstanceStatus.ACTIVE:
            raise NotFoundError(f"instance {instance_id} not found or expired", code="not_found")
        data_dir = Path(instance.runtime_dir)
        server = postgres.running(data_dir)
        if server is not None:
            return server, []
        if not (data_dir / "PG_VERSION").exists():
            raise NotFoundError(f"instance {instance_id} has lost its runtime directory", code="not_found")
        (data_dir / "postmaster.pid").unlink(missing_ok=True)
        server = postgres.start(images.image_resolve(instance.image_id), data_dir)
        old_port = instance.port
        instance.port, instance.pid = server.port, server.pid
        instance.save(update_fields=["port", "pid"])
    message = f"instance {instance_id}: its server was not running; started again from its runtime directory"
    return server, [f"{message} (port {old_port} → {server.port})"]
