"""What a fire answers, and the fire path as a kind's source sees it: `FirePath` is what
`TriggerFiring` offers the sources (a scheduler, a relay), so a kind's module needs no more
of it than this."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.core.errors import Conflict, NotFound, ProblemCode
from app.core.vocabulary import Multitask
from app.triggers.schemas import FireRead

log = logging.getLogger(__name__)


class TriggerDisabled(Conflict):
    """The trigger is disabled: it does not fire until it is enabled again."""

    code = ProblemCode.TRIGGER_DISABLED

    def __init__(self, trigger_id: str) -> None:
        self.trigger_id = trigger_id
        super().__init__(f"trigger {trigger_id!r} is disabled; enable it to fire it")

    def extensions(self) -> dict[str, Any]:
        return {"trigger_id": self.trigger_id}


@dataclass(frozen=True)
class FireResult:
    """A fire: `replayed` when the occasion had fired before (this is that first fire and
    nothing started now); `response` is what a webhook delivery was answered."""

    fire: FireRead
    replayed: bool = False
    response: dict[str, Any] | None = None


class FirePath(Protocol):
    """The one fire path (`firing.TriggerFiring`, whose methods these are)."""

    async def fire(
        self,
        trigger_id: str,
        context: Mapping[str, Any],
        *,
        fire_key: str,
        fired_at: datetime | None = None,
        scheduled_for: datetime | None = None,
        multitask: Multitask | None = None,
        about: Mapping[str, Any] | None = None,
        source_id: str | None = None,
        catching_up: bool = False,
    ) -> FireResult: ...

    async def skip(
        self,
        trigger_id: str,
        *,
        fire_key: str,
        reason: str,
        fired_at: datetime | None = None,
        scheduled_for: datetime | None = None,
        source_id: str | None = None,
    ) -> FireResult: ...


async def quietly(firing: Awaitable[FireResult]) -> FireResult | None:
    """A source's fire: None, logged, for a trigger disabled or deleted since the source
    found it due, instead of raising into the source's pass."""
    try:
        return await firing
    except (NotFound, TriggerDisabled) as exc:
        log.info("a due trigger did not fire: %s", exc)
        return None
