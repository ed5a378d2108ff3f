"""Recording operator actions: ``audited`` runs an action and writes its audit entry in one
transaction, so a row exists exactly when the action took effect."""

import ipaddress
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction

from pipeline_project.api.authentication import request_token
from pipeline_project.audit import actions
from pipeline_project.audit.models import AuditEntry
from pipeline_project.web.arguments import arguments_masked

MAX_RECORDED_IDS = 100  # a bulk action's entry names its first objects; ``count`` says how many


@dataclass(frozen=True)
class Actor:
    """Who acts, through which door, from which address."""

    name: str
    via: str
    address: str | None = None

    @classmethod
    def of_request(cls, request) -> "Actor":
        if (token := request_token(request)) is not None:
            return cls(f"token:{token.name}", "api", _address(request))
        via = (
            "api"
            if request.path.startswith("/api/")
            else "pipeline"
            if request.path.startswith("/pipeline/")
            else "admin"
        )
        return cls(request.user.get_username(), via, _address(request))


def _address(request) -> str | None:
    try:
        return str(ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")))
    except ValueError:  # a Unix socket, a test client: no address to record
        return None


@dataclass
class Audited:
    """What ``audited``'s block fills in once it knows: how many changed, more objects, detail."""

    objects: list = field(default_factory=list)
    count: int | None = None
    detail: dict = field(default_factory=dict)


def audit_record(
    *,
    actor: Actor,
    action: str,
    objects: Iterable = (),
    filter: dict | None = None,
    count: int | None = None,
    detail: dict | None = None,
) -> AuditEntry:
    return AuditEntry.objects.create(
        actor=actor.name[:200],
        via=actor.via,
        address=actor.address,
        action=action,
        object_type=actions.action(action).object_type,
        object_ids=[str(obj) for obj in list(objects)[:MAX_RECORDED_IDS]],
        filter=_masked(filter),
        count=count,
        detail=_masked(detail or {}),
    )


def _masked(value):
    """A filter or detail as the trail keeps it: secret arguments masked, in JSON given as text too
    (an ``args`` filter, the admin's ``args:{...}`` search), since every auditor reads the trail."""
    if isinstance(value, str):
        prefix, text = ("args:", value[5:]) if value.startswith("args:") else ("", value)
        try:
            parsed = json.loads(text)
        except ValueError:
            return value
        return (
            prefix + json.dumps(arguments_masked(parsed), ensure_ascii=False)
            if isinstance(parsed, dict | list)
            else value
        )
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in arguments_masked(value).items()}
    return arguments_masked(value)


@contextmanager
def audited(
    *, request, action: str, objects: Iterable = (), filter: dict | None = None, record: bool = True
) -> Iterator[Audited]:
    """Run the block (the action) and record it in the same transaction; nothing is recorded if
    the block raises, or if ``record`` is false (a dry run). The block sets ``count`` (and may
    add objects or detail) on what it gets."""
    entry = Audited(objects=list(objects))
    with transaction.atomic():
        yield entry
        if record:
            audit_record(
                actor=Actor.of_request(request),
                action=action,
                objects=entry.objects,
                filter=filter,
                count=entry.count,
                detail=entry.detail,
            )


def audited_call[T](
    call: Callable[[], T],
    *,
    request,
    action: str,
    objects: Iterable = (),
    filter: dict | None = None,
    record: bool = True,
    count: Callable[[T], int] = lambda result: 1,
    detail: Callable[[T], dict] | None = None,
    objects_of: Callable[[T], Iterable] | None = None,
) -> T:
    """``call()`` (one service call) as the operator action ``action``, recorded as ``audited``
    records it; returns what the call returned. The entry's ``count`` is ``count(result)`` (one
    object by default), its ``detail`` ``detail(result)``; ``objects_of(result)`` adds the objects
    the call names itself (a bulk action that reports those it changed)."""
    with audited(request=request, action=action, objects=objects, filter=filter, record=record) as entry:
        result = call()
        entry.count = count(result)
        if detail is not None:
            entry.detail = detail(result)
        if objects_of is not None:
            entry.objects.extend(objects_of(result))
    return result
