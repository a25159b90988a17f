"""The registry of trigger kinds: the built-in kinds in their order (the order of the
published unions and of their sources), one kind per name, shapes tagged with their kind's
name, and a kind's shapes published only while it is registered."""

from __future__ import annotations

from typing import Literal

import pytest

from app.core.config import TriggerSettings
from app.triggers.engine.kinds import KINDS, Kind, SourceParts
from app.triggers.engine.kinds.base import COMMON_ROOTS
from app.triggers.engine.kinds.registry import UnknownKind
from app.triggers.engine.kinds.webhook import WEBHOOK
from app.triggers.schemas import (
    PUBLISHED_KINDS,
    TriggerReadFields,
    WebhookConfig,
    WebhookTriggerCreate,
)


class MistaggedRead(TriggerReadFields):
    kind: Literal["webhook"]
    config: WebhookConfig


class Mistagged(Kind[WebhookConfig]):
    name = "mistagged"
    config = WebhookConfig
    create_shape = WebhookTriggerCreate
    read_shape = MistaggedRead
    roots = COMMON_ROOTS


def test_the_built_in_kinds_and_their_sources_in_order() -> None:
    assert list(PUBLISHED_KINDS) == ["webhook", "schedule", "chain"]
    assert KINDS.of("chain").roots == {"trigger", "fired_at", "source"}
    parts = SourceParts(None, None, TriggerSettings())  # type: ignore[arg-type]
    assert [name for name, _ in KINDS.sources(parts)] == ["scheduler", "chain relay"]
    with pytest.raises(UnknownKind, match="'cron'"):
        KINDS.of("cron")


def test_a_name_is_one_kind_and_its_shapes_carry_it() -> None:
    with pytest.raises(ValueError, match="'webhook' is registered already"):
        KINDS.register(WEBHOOK)
    with pytest.raises(
        ValueError, match=r"WebhookTriggerCreate.kind must be Literal\['mistagged'\]"
    ):
        KINDS.register(Mistagged())
    assert "mistagged" not in PUBLISHED_KINDS and KINDS.find("mistagged") is None
