"""Trigger commands: create (with `Idempotency-Key`), patch (compare-and-set on version),
delete, enable, disable, and a webhook's secret rotation. Each is one short transaction.

What differs by kind is the kind's (`engine/kinds/`): a schedule is armed while it is
enabled (`next_fire_at` is its first fire time after the create, the enable or a change of
its config, and NULL while it is disabled), a chain is checked against the other chains
while it is enabled, a webhook has a secret. Every change wakes the readers of the
triggers stream (a scheduler among them) after its commit.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.store import agents as agent_store
from app.core.errors import Conflict, NotFound, VersionConflict
from app.core.ids import new_id
from app.core.streams import TRIGGERS_STREAM
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.events.engine.bus import EventBus
from app.events.engine.published import Written, published
from app.runs.store import conversations
from app.triggers.engine.checks import check_config, check_target
from app.triggers.engine.kinds import KINDS
from app.triggers.schemas import RunTarget, TriggerCreate, TriggerPatch, TriggerRead
from app.triggers.store import triggers as store
from app.workflows import store as workflow_store

CREATE_SCOPE = "triggers.create"
SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A webhook's signing secret: 32 random bytes."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


class TriggerCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._bus = bus
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    def _changed(self) -> None:
        published(self._bus, [Written(TRIGGERS_STREAM)])

    async def create(
        self,
        body: TriggerCreate,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[TriggerRead, bool]:
        """The trigger (a webhook's with its secret), and whether it is the first response
        to this key, replayed: the trigger as it is now, its current secret included."""
        kind = KINDS.of(body.kind)
        checked = check_target(body.kind, body.target, "body.target")
        config = check_config(body.kind, body.config, "body.config")
        now = self._clock()
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        async with self._sessionmaker() as session, session.begin():
            create = await keyed_create(
                session, key, now=now, retention=self._idempotency_retention
            )
            if create.replay is not None:
                found = await store.get_trigger(
                    session, create.replay.resource_id, with_secret=True
                )
                if found is None:
                    raise Conflict(
                        "the trigger this Idempotency-Key created was deleted; "
                        "send a new key to create another"
                    )
                return found, True
            await _check_target_exists(session, checked.target)
            trigger_id = new_id("trg")
            if body.enabled:
                await kind.check_enabled(session, trigger_id, config, checked.target)
            values = {
                "id": trigger_id,
                "name": body.name,
                "description": body.description,
                "kind": body.kind,
                "enabled": body.enabled,
                "target": checked.target.model_dump(mode="json"),
                "config": config.model_dump(mode="json"),
                "secret": new_secret() if kind.has_secret else None,
                "next_fire_at": kind.next_fire_at(config, body.enabled, now),
                "version": 1,
                "created_at": now,
                "updated_at": now,
            }
            trigger = await store.insert_trigger(session, values)
            await create.remember(trigger.id)
        self._changed()
        return trigger, False

    async def update(
        self, trigger_id: str, body: TriggerPatch, *, expected_version: int | None
    ) -> TriggerRead:
        changes = body.model_dump(mode="json", exclude_unset=True)
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            current = await _current(session, trigger_id, expected_version)
            kind = KINDS.of(current.kind)
            values: dict[str, Any] = {
                k: v for k, v in changes.items() if k in ("name", "description")
            }
            target = current.target
            config = kind.config_of(current)
            if "target" in changes:
                target = check_target(current.kind, changes["target"], "body.target").target
                await _check_target_exists(session, target)
                values["target"] = target.model_dump(mode="json")
            if "config" in changes:
                config = check_config(current.kind, changes["config"], "body.config")
                values["config"] = config.model_dump(mode="json")
                values["next_fire_at"] = kind.next_fire_at(config, current.enabled, now)
            if current.enabled:
                await kind.check_enabled(session, trigger_id, config, target)
            updated = await store.update_trigger(
                session, trigger_id, read_version=current.version, values=values, now=now
            )
            assert updated is not None  # the row is locked
        self._changed()
        return updated

    async def delete(self, trigger_id: str, *, expected_version: int | None) -> None:
        """Its fire log goes with it; the runs and executions it started stay (their
        metadata still names it)."""
        async with self._sessionmaker() as session, session.begin():
            current = await _current(session, trigger_id, expected_version)
            await store.delete_trigger(session, trigger_id, read_version=current.version)
        self._changed()

    async def set_enabled(
        self, trigger_id: str, enabled: bool, *, expected_version: int | None
    ) -> TriggerRead:
        """Enable or disable; a schedule is armed (its next fire from now) or disarmed. A
        trigger already so is returned as it is."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            current = await _current(session, trigger_id, expected_version)
            if current.enabled is enabled:
                return current
            kind = KINDS.of(current.kind)
            config = kind.config_of(current)
            values: dict[str, Any] = {
                "enabled": enabled,
                "next_fire_at": kind.next_fire_at(config, enabled, now),
            }
            if enabled:
                await kind.check_enabled(session, trigger_id, config, current.target)
            updated = await store.update_trigger(
                session, trigger_id, read_version=current.version, values=values, now=now
            )
            assert updated is not None  # the row is locked
        self._changed()
        return updated

    async def rotate_secret(self, trigger_id: str, *, expected_version: int | None) -> TriggerRead:
        """A webhook's new secret, returned this once; the old one stops working now."""
        now = self._clock()
        async with self._sessionmaker() as session, session.begin():
            current = await _current(session, trigger_id, expected_version)
            if not KINDS.of(current.kind).has_secret:
                raise Conflict(f"a {current.kind} trigger has no secret to rotate")
            updated = await store.update_trigger(
                session,
                trigger_id,
                read_version=current.version,
                values={"secret": new_secret()},
                now=now,
            )
            assert updated is not None  # the row is locked
        return updated


async def _current(
    session: AsyncSession, trigger_id: str, expected_version: int | None
) -> TriggerRead:
    """The trigger, locked; NotFound, or VersionConflict against `expected_version`."""
    current = await store.get_trigger(session, trigger_id, lock=True)
    if current is None:
        raise NotFound("trigger", trigger_id)
    if expected_version is not None and expected_version != current.version:
        raise VersionConflict(expected_version, current.version)
    return current


async def _check_target_exists(session: AsyncSession, target: Any) -> None:
    """What the target starts must exist now, as `POST /v1/runs` requires of its agent (a
    404 naming it); a fire whose agent or workflow is gone later records a failure."""
    if isinstance(target, RunTarget):
        if await agent_store.get_agent(session, target.agent_id) is None:
            raise NotFound("agent", target.agent_id)
        conversation = target.conversation_id
        if conversation is not None and not await conversations.exists(session, conversation):
            raise NotFound("conversation", conversation)
    elif await workflow_store.get_workflow(session, target.workflow_id) is None:
        raise NotFound("workflow", target.workflow_id)
