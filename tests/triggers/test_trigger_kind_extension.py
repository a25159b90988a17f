"""A trigger kind is one module and one registry line: a kind defined here, outside `app/`
(a doorbell: its config, its template roots, its check, its fire rule and a tiny source),
registered before the app is built, is accepted and shown by the real API, published in
the OpenAPI document, started as a component with the process, and fires runs through
the one fire path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.config import Settings
from app.core.errors import ValidationFailed
from app.core.vocabulary import FireStatus
from app.triggers.engine.fires import FirePath, FireResult, quietly
from app.triggers.engine.kinds import KINDS, Kind, SourceParts
from app.triggers.engine.kinds.base import COMMON_ROOTS, Admission, Source
from app.triggers.schemas import (
    PUBLISHED_KINDS,
    TriggerCreate,
    TriggerCreateFields,
    TriggerRead,
    TriggerReadFields,
)
from tests.support.api import assert_problem
from tests.support.factories import make_agent
from tests.support.server import running_app


class DoorbellConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    room: str = Field(min_length=1)
    quiet: bool = Field(False, description="While quiet, a ring starts nothing.")


class DoorbellTriggerCreate(TriggerCreateFields):
    """Fired when its doorbell rings."""

    kind: Literal["doorbell"]
    config: DoorbellConfig


class DoorbellTriggerRead(TriggerReadFields):
    kind: Literal["doorbell"]
    config: DoorbellConfig
    next_fire_times: None = Field(None, description="Null: a doorbell has no fire times.")


class Doorbell:
    """The kind's source: each ring fires its trigger once, the ring's id the occasion."""

    def __init__(self, firing: FirePath) -> None:
        self._firing = firing
        self.running = False

    def start(self) -> None:
        self.running = True

    async def stop(self) -> None:
        self.running = False

    async def ring(self, trigger_id: str, ring_id: str, visitor: str) -> FireResult | None:
        assert self.running
        fired = self._firing.fire(trigger_id, {"visitor": visitor}, fire_key=f"ring:{ring_id}")
        return await quietly(fired)


class DoorbellKind(Kind[DoorbellConfig]):
    name = "doorbell"
    config = DoorbellConfig
    create_shape = DoorbellTriggerCreate
    read_shape = DoorbellTriggerRead
    roots = COMMON_ROOTS | {"visitor"}

    def __init__(self) -> None:
        self.bells: list[Doorbell] = []

    def check(self, config: DoorbellConfig, field: str) -> None:
        if config.room == "attic":
            raise ValidationFailed.field(f"{field}.room", "has no doorbell")

    async def admit(
        self, session: AsyncSession, trigger: TriggerRead, *, catching_up: bool
    ) -> Admission:
        if self.config_of(trigger).quiet:
            return Admission(skip="quiet: the doorbell is muted")
        return Admission()

    def source(self, parts: SourceParts) -> tuple[str, Source]:
        bell = Doorbell(parts.firing)
        self.bells.append(bell)
        return "doorbell", bell


@pytest.fixture
def doorbell() -> Iterator[DoorbellKind]:
    with KINDS.registered(DoorbellKind()) as kind:
        assert isinstance(kind, DoorbellKind)
        yield kind


def doorbell_trigger(agent_id: str, **config: Any) -> dict[str, Any]:
    return {
        "kind": "doorbell",
        "name": "front door",
        "config": {"room": "hall", **config},
        "target": {
            "kind": "run",
            "agent_id": agent_id,
            "input": "{{ visitor }} at the {{ trigger.name }}",
        },
    }


async def test_a_kind_defined_outside_the_app_is_created_fired_and_published(
    doorbell: DoorbellKind, settings: Settings, clean_db: AsyncEngine
) -> None:
    async with running_app(settings) as (url, app), httpx.AsyncClient(base_url=url) as client:
        (bell,) = doorbell.bells  # the process built its source and started it
        assert bell.running
        agent_id = (await make_agent(client))["id"]

        created = await client.post("/v1/triggers", json=doorbell_trigger(agent_id))
        assert created.status_code == 201, created.text
        trigger = created.json()
        assert trigger["kind"] == "doorbell" and trigger["config"] == {
            "room": "hall",
            "quiet": False,
        }
        assert trigger["secret"] is None and trigger["next_fire_times"] is None

        # The kind's checks: its config's, its own rule, and its roots for the templates.
        attic = assert_problem(
            await client.post("/v1/triggers", json=doorbell_trigger(agent_id, room="attic")),
            422,
            "validation_error",
        )
        assert [e["field"] for e in attic["errors"]] == ["body.config.room"]
        webhook_root = doorbell_trigger(agent_id)
        webhook_root["target"]["input"] = "{{ payload.title }}"
        wrong = assert_problem(
            await client.post("/v1/triggers", json=webhook_root), 422, "validation_error"
        )
        assert [e["field"] for e in wrong["errors"]] == ["body.target.input"]

        fired = await bell.ring(trigger["id"], "r1", "Ada")
        assert fired is not None and fired.fire.status is FireStatus.STARTED
        again = await bell.ring(trigger["id"], "r1", "Ada")
        assert again is not None and again.replayed and again.fire.id == fired.fire.id
        run = (await client.get(f"/v1/runs/{fired.fire.run_id}")).json()
        assert run["input"] == "Ada at the front door"
        assert run["metadata"]["trigger"]["kind"] == "doorbell"
        assert run["metadata"]["trigger"]["fire_key"] == "ring:r1"

        # The kind's fire rule, read under the trigger's lock.
        muted = await client.patch(
            f"/v1/triggers/{trigger['id']}", json={"config": {"room": "hall", "quiet": True}}
        )
        assert muted.status_code == 200, muted.text
        skipped = await bell.ring(trigger["id"], "r2", "Bob")
        assert skipped is not None and skipped.fire.status is FireStatus.SKIPPED
        assert skipped.fire.error == "quiet: the doorbell is muted"
        fires = (await client.get(f"/v1/triggers/{trigger['id']}/fires")).json()["items"]
        assert sorted(f["fire_key"] for f in fires) == ["ring:r1", "ring:r2"]

        document = app.openapi()["components"]["schemas"]
        mapping = document["TriggerCreate"]["discriminator"]["mapping"]
        assert mapping["doorbell"] == "#/components/schemas/DoorbellTriggerCreate"
        assert "DoorbellTriggerRead" in document

    assert not bell.running  # stopped with the process


def test_a_kind_unregistered_is_refused_again(doorbell: DoorbellKind) -> None:
    body = {"kind": "doorbell", "name": "n", "target": {}, "config": {"room": "hall"}}
    assert TriggerCreate.model_validate(body).kind == "doorbell"
    KINDS.unregister("doorbell")
    try:
        assert "doorbell" not in PUBLISHED_KINDS
        with pytest.raises(ValueError, match="Input should be 'webhook', 'schedule' or 'chain'"):
            TriggerCreate.model_validate(body)
    finally:
        KINDS.register(doorbell)  # for the fixture to take it out
