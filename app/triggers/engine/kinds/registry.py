"""The registry of trigger kinds: the commands, the checks, the fire path and the API look a
kind up here by its name, and the process starts the sources it lists. Registering a kind
publishes its shapes (`schemas.PUBLISHED_KINDS`), so the API accepts its name and the
OpenAPI document shows it."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.triggers.engine.kinds.base import Kind, Source, SourceParts
from app.triggers.schemas import PUBLISHED_KINDS


class UnknownKind(LookupError):
    """No trigger kind of this name is registered (a stored trigger whose kind's module
    is no longer registered)."""


class TriggerKinds:
    """The kinds by name, in the order they were registered (the order of the published
    unions, and of the sources' start)."""

    def __init__(self) -> None:
        self._kinds: dict[str, Kind[Any]] = {}

    def register(self, kind: Kind[Any]) -> None:
        """Add `kind` (ValueError for a name taken, or shapes tagged with another name:
        the published unions map each tag to its shape)."""
        if kind.name in self._kinds:
            raise ValueError(f"a trigger kind named {kind.name!r} is registered already")
        for shape in (kind.create_shape, kind.read_shape):
            tags = typing.get_args(shape.model_fields["kind"].annotation)
            if tags != (kind.name,):
                raise ValueError(f"{shape.__name__}.kind must be Literal[{kind.name!r}]")
        self._kinds[kind.name] = kind
        PUBLISHED_KINDS[kind.name] = kind.shapes

    def unregister(self, name: str) -> None:
        del self._kinds[name]
        del PUBLISHED_KINDS[name]

    @contextmanager
    def registered(self, kind: Kind[Any]) -> Iterator[Kind[Any]]:
        """`kind` registered for the block (a test's kind, which others must not see)."""
        self.register(kind)
        try:
            yield kind
        finally:
            self.unregister(kind.name)

    def of(self, name: str) -> Kind[Any]:
        found = self.find(name)
        if found is None:
            raise UnknownKind(f"no trigger kind named {name!r} is registered")
        return found

    def find(self, name: str) -> Kind[Any] | None:
        return self._kinds.get(name)

    def sources(self, parts: SourceParts) -> list[tuple[str, Source]]:
        """Each kind's source, named, in the kinds' order."""
        built = (kind.source(parts) for kind in self._kinds.values())
        return [source for source in built if source is not None]
