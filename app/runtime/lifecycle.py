"""The components of one process, in the order they start (they stop in reverse): an
explicit registry the composition root fills once, which `/readyz`, the overview and the
metrics read, and whose watchdog logs a supervised component that stops making passes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from app.runtime.components import Loop, Reading, Wakes

log = logging.getLogger(__name__)

WATCH_INTERVAL_S = 30.0


class Part(Protocol):
    """A part of the process with its own `start` and `stop`: most run a wake loop, as
    `part.loop` (the reconciler, the merge queue, a trigger kind's source, …)."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class Component:
    """A part of the process with a life of its own: started in order, stopped in reverse.
    `loop`: its supervised wake loop, when it has one (what `/readyz` reads)."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], Awaitable[None]]
    loop: Loop | None = None

    @classmethod
    def of(cls, name: str, part: Loop | Part) -> Component:
        """A wake loop, or a part with its own `start` and `stop` (supervised through the
        wake loop it runs as `part.loop`, when it has one)."""
        loop = part if isinstance(part, Loop) else getattr(part, "loop", None)
        return cls(name, part.start, part.stop, loop if isinstance(loop, Loop) else None)


class Components:
    """The process's components in start order."""

    def __init__(self, components: Iterable[Component] = ()) -> None:
        self._components: list[Component] = []
        self._stalled: set[str] = set()  # reported in the log, until it passes again
        self.add(*components)

    def add(self, *components: Component) -> None:
        names = {c.name for c in self._components}
        for component in components:
            if component.name in names:
                raise ValueError(f"two components are named {component.name!r}")
            names.add(component.name)
            self._components.append(component)

    def __iter__(self) -> Iterator[Component]:
        return iter(list(self._components))

    def __len__(self) -> int:
        return len(self._components)

    def readings(self) -> list[Reading]:
        """Each supervised component as it is now, under its name here."""
        return [
            replace(c.loop.reading(), name=c.name) for c in self._components if c.loop is not None
        ]

    def restarts(self) -> dict[str, int]:
        return {reading.name: reading.restarts for reading in self.readings()}

    def watchdog(self) -> Component:
        """A component that logs each component that stalled, once per stall."""
        loop = Loop("component-watchdog", self.report_stalls, Wakes(WATCH_INTERVAL_S))
        return Component.of("component watchdog", loop)

    async def report_stalls(self) -> list[str]:
        """The names of the components that stalled since the last report (logged)."""
        stalled = {r.name: r for r in self.readings() if r.stalled}
        news = [name for name in stalled if name not in self._stalled]
        for name in news:
            last = stalled[name].last_pass
            log.warning(
                "component %s stalled: no pass since %s",
                name,
                last.isoformat() if last else "it started",
                extra={"fields": {"component": name}},
            )
        self._stalled = set(stalled)
        return news
