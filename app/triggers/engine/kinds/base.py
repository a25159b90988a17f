"""What a trigger kind is: its config and the shapes the API publishes, the template roots
a fire provides, its checks on save, when it is armed, its fire rule and its source. A
kind subclasses `Kind`, sets the class attributes and overrides only what it does
differently; the defaults are a kind fired from outside (a request, a test's hand)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.config import TriggerSettings
from app.core.vocabulary import Multitask
from app.telemetry.metrics import Metrics
from app.triggers.engine.fires import FirePath
from app.triggers.schemas import KindShapes, RunTarget, TriggerRead, WorkflowTarget

# Every fire's template context holds these (`firing.py` puts them in).
COMMON_ROOTS = frozenset({"trigger", "fired_at"})

C = TypeVar("C", bound=BaseModel)


@dataclass(frozen=True)
class Admission:
    """What a kind's fire rule makes of a fire: `skip` (the reason, recorded as a skipped
    fire), or the lane and lane policy its run takes (None: the target's own)."""

    skip: str | None = None
    lane: str | None = None
    multitask: Multitask | None = None


class Source(Protocol):
    """A background component that fires a kind's triggers (started and stopped with the
    process, after the TaskEngine and the group committer)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class SourceParts:
    """What a kind's source is built from."""

    sessionmaker: async_sessionmaker[AsyncSession]
    firing: FirePath
    settings: TriggerSettings
    metrics: Metrics | None = None


class Kind(Generic[C]):
    """A kind of trigger. `name` is stored in `triggers.kind`; `config` reads its config;
    `create_shape` and `read_shape` are its variants of `TriggerCreate` and `TriggerRead`
    (`kind` a `Literal` of `name`); `roots` are what its fires put in the template context
    (`COMMON_ROOTS` and its own)."""

    name: ClassVar[str]
    config: type[C]
    create_shape: ClassVar[type[BaseModel]]
    read_shape: ClassVar[type[BaseModel]]
    roots: ClassVar[frozenset[str]]
    # A webhook's: the trigger has a signing secret, made on create and rotated on demand.
    has_secret: ClassVar[bool] = False

    @property
    def shapes(self) -> KindShapes:
        return KindShapes(self.config, self.create_shape, self.read_shape)

    def config_of(self, trigger: TriggerRead) -> C:
        """The trigger's config (ValueError for a trigger of another kind)."""
        if trigger.kind != self.name:
            raise ValueError(f"trigger {trigger.id} is a {trigger.kind} trigger")
        return self.config.model_validate(trigger.config)

    def check(self, config: C, field: str) -> None:
        """What the config must satisfy beyond its schema (ValidationFailed naming a field
        under `field`)."""

    async def check_enabled(
        self,
        session: AsyncSession,
        trigger_id: str,
        config: C,
        target: RunTarget | WorkflowTarget,
    ) -> None:
        """What an enabled trigger must satisfy with the others, checked when it is saved
        enabled or enabled (in the saving transaction)."""

    def next_fire_at(self, config: C, enabled: bool, now: datetime) -> datetime | None:
        """The time the trigger is armed for (`triggers.next_fire_at`), when it is saved or
        enabled; None: its source does not wait on a time."""
        return None

    def next_fire_times(
        self, config: C, enabled: bool, now: datetime, count: int
    ) -> list[datetime] | None:
        """Its next `count` fire times as the API shows them; None: it has no fire times."""
        return None

    async def admit(
        self, session: AsyncSession, trigger: TriggerRead, *, catching_up: bool
    ) -> Admission:
        """The fire rule, read under the trigger's lock before a fire starts anything
        (`catching_up`: a fire its source asks to queue behind the previous one)."""
        return Admission()

    def source(self, parts: SourceParts) -> tuple[str, Source] | None:
        """Its background component and the component's name; None: it is fired from
        outside (a request, by hand)."""
        return None
