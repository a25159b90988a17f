"""The chain kind: fired by the chain relay (`engine/chain_relay.py`) when a run of an
agent settles, or an execution of a workflow finishes, in one of its statuses; a fire's
context holds the `source`. An enabled chain must not close a cycle with the others, and
its fire rule is the depth limit, which stops a cascade the save-time check cannot see."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.vocabulary import TargetKind, TriggerKind
from app.triggers.engine import chain_graph
from app.triggers.engine.chain_graph import MAX_CHAIN_DEPTH
from app.triggers.engine.chain_relay import ChainRelay
from app.triggers.engine.fires import FirePath, FireResult, quietly
from app.triggers.engine.kinds.base import COMMON_ROOTS, Kind, Source, SourceParts
from app.triggers.schemas import (
    ChainConfig,
    ChainTriggerCreate,
    ChainTriggerRead,
    RunTarget,
    WorkflowTarget,
)
from app.triggers.store import triggers as store

MAX_CHAINS = 10_000  # enabled chains read for the graph check


class ChainKind(Kind[ChainConfig]):
    name = TriggerKind.CHAIN.value
    config = ChainConfig
    create_shape = ChainTriggerCreate
    read_shape = ChainTriggerRead
    roots = COMMON_ROOTS | {"source"}

    async def check_enabled(
        self,
        session: AsyncSession,
        trigger_id: str,
        config: ChainConfig,
        target: RunTarget | WorkflowTarget,
    ) -> None:
        """An enabled chain must not close a cycle, or make a path over `MAX_CHAIN_DEPTH`
        chains, with the other enabled chains (422 naming `body.target`). Chains are
        checked one at a time (an advisory lock until commit), so two saved at once cannot
        close a cycle that neither sees."""
        await store.lock_chains(session)
        others = await store.list_triggers(
            session,
            after_id=None,
            limit=MAX_CHAINS,
            filters={"kind": self.name, "enabled": True},
        )
        chain_graph.check(
            _edge(trigger_id, config, target),
            [_edge(t.id, self.config_of(t), t.target) for t in others],
        )

    def source(self, parts: SourceParts) -> tuple[str, Source]:
        relay = ChainRelay(
            parts.sessionmaker,
            ChainFire(parts.firing),
            interval_s=parts.settings.chain_relay_interval_s,
        )
        return "chain relay", relay


def _edge(
    trigger_id: str, config: ChainConfig, target: RunTarget | WorkflowTarget
) -> chain_graph.ChainEdge:
    source = config.agent_id if config.source is TargetKind.RUN else config.workflow_id
    aim = target.agent_id if isinstance(target, RunTarget) else target.workflow_id
    return chain_graph.ChainEdge(
        trigger_id,
        chain_graph.Node(config.source, source or ""),
        chain_graph.Node(target.kind, aim),
    )


class ChainFire:
    """The chain relay's `FireChain` over the fire path: `depth` chains led to this fire,
    and it goes into the run's `metadata.trigger.depth`. Past `MAX_CHAIN_DEPTH` the fire is
    skipped. None when the chain was disabled or deleted since it was matched."""

    def __init__(self, firing: FirePath) -> None:
        self._firing = firing

    async def __call__(
        self, trigger_id: str, context: dict[str, Any], fire_key: str, depth: int
    ) -> FireResult | None:
        source = context["source"]
        if depth > MAX_CHAIN_DEPTH:
            reason = f"chain depth {depth} is over the limit of {MAX_CHAIN_DEPTH}"
            skipped = self._firing.skip(
                trigger_id, fire_key=fire_key, reason=reason, source_id=source["id"]
            )
            return await quietly(skipped)
        about = {"depth": depth, "source": {"kind": source["kind"], "id": source["id"]}}
        fired = self._firing.fire(
            trigger_id, context, fire_key=fire_key, about=about, source_id=source["id"]
        )
        return await quietly(fired)


CHAIN = ChainKind()
