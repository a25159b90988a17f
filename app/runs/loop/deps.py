"""What the agent loop is given by the composition root, shared by every run of a process."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentRead
from app.approvals.engine.approvals import ApprovalCommands
from app.core.breakers import Breakers
from app.core.config import CompactionSettings
from app.events.engine.bus import EventBus
from app.llm.policy import LLMRetryPolicy
from app.llm.prices import PriceTable
from app.llm.provider import Provider
from app.runs.loop.boundary import BoundaryWrite
from app.runs.loop.kinds.auto import AutoLoopPolicy
from app.runs.loop.retry import RunRetryPolicy
from app.runs.loop.stagnation import StagnationPolicy
from app.runs.loop.tool_runner import ToolRunner
from app.runs.schemas.runs import RunRead
from app.runs.tools.mcp.hub import McpHub
from app.runtime.group_commit import GroupCommitter
from app.telemetry.metrics import Metrics

if TYPE_CHECKING:  # the kinds' loops import this module
    from app.runs.loop.kinds.registry import LoopKinds

# The provider for an agent's model, as one run (or one purpose of it) calls it: a scripted
# model keeps its place in the script per caller.
ProviderFactory = Callable[[AgentRead, str], Provider]  # (agent, run id)

# Tool batches in a row in which every call failed before the run fails (0: never).
MAX_ERROR_BATCHES = 3


class LeaseLost(Exception):
    """Another worker owns this run now (or it was settled meanwhile): stop writing."""


@dataclass
class LoopDeps:
    sessionmaker: async_sessionmaker[AsyncSession]
    bus: EventBus
    providers: ProviderFactory
    tools: ToolRunner
    clock: Callable[[], datetime]
    committer: GroupCommitter[BoundaryWrite, RunRead | None]
    tool_services: Any = None
    run_retry: RunRetryPolicy = field(default_factory=RunRetryPolicy)
    stagnation: StagnationPolicy = field(default_factory=StagnationPolicy)
    max_error_batches: int = MAX_ERROR_BATCHES  # 0: no "too many errors" terminator
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    metrics: Metrics | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    downgrade_at_percent: float | None = None  # None: runs keep their agent's model
    auto_loops: AutoLoopPolicy = field(default_factory=AutoLoopPolicy)  # `auto`'s choice
    loop_kinds: LoopKinds | None = None  # None: the built-in ones (kinds/registry.LOOP_KINDS)
    breakers: Breakers = field(default_factory=Breakers)  # shared with the tool runner
    llm_policy: LLMRetryPolicy = field(default_factory=LLMRetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # between LLM attempts
    approvals: ApprovalCommands | None = None  # None: calls that need approval are refused
    mcp: McpHub = field(default_factory=McpHub)  # agents' MCP servers, under its policy
    # During a model call, how often the loop reads its run's cancel flag when no wake-up
    # came (one may be lost; see app.events.engine.bus).
    cancel_poll_s: float = 2.0


def prompt_hash(system_prompt: str) -> str:
    return hashlib.sha256(system_prompt.encode()).hexdigest()
