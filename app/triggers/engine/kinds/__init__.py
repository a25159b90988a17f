"""Trigger kinds: one module each, and the registry that names them (one line per kind).
A kind defined elsewhere (a plugin, a test) is registered with `KINDS.register` before
the app is built; see "A trigger kind" in `docs/architecture.md`."""

from app.triggers.engine.kinds.base import Kind, SourceParts
from app.triggers.engine.kinds.chain import CHAIN
from app.triggers.engine.kinds.registry import TriggerKinds
from app.triggers.engine.kinds.schedule import SCHEDULE
from app.triggers.engine.kinds.webhook import WEBHOOK

KINDS = TriggerKinds()
KINDS.register(WEBHOOK)
KINDS.register(SCHEDULE)
KINDS.register(CHAIN)

__all__ = ["KINDS", "Kind", "SourceParts"]
