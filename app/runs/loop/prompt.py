"""What an LLM call of a run is made of, around its live messages: the frame (the system
prompt with the run journal's digest, and the rendered journal) and the tools offered.

The journal goes in twice: its ~500-character digest in the system prompt, and
its full text as a user/assistant pair just before the live messages. The system prompt's
hash (resume drift) is taken of the agent's prompt alone, since the digest changes with
every journal write.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.schemas import AgentRead
from app.core.messages import Message
from app.llm.provider import ToolChoice, ToolSpec
from app.runs.engine.journal import render_digest, render_full
from app.runs.loop.prompt_profiles import PromptProfile, personality_section
from app.runs.schemas.journal import Journal
from app.runs.store import journal as journal_store
from app.runs.tools.journal_tools import JOURNAL_TOOL_NAMES
from app.runs.tools.registry import ToolRegistry


@dataclass(frozen=True)
class Frame:
    system: str
    journal: list[Message]


async def read_frame(
    sessionmaker: async_sessionmaker[AsyncSession],
    agent: AgentRead,
    conversation_id: str,
    profile: PromptProfile,
) -> Frame:
    async with sessionmaker() as session:
        stored = await journal_store.read_journal(session, conversation_id)
    return frame_of(agent, stored, profile)


def frame_of(
    agent: AgentRead, stored_journal: dict[str, Any] | None, profile: PromptProfile
) -> Frame:
    """The system prompt: the agent's own, its personality as the model tier's profile
    renders it, and the journal's digest."""
    journal = Journal.model_validate(stored_journal or {})
    parts = [agent.system_prompt]
    if agent.personality is not None:
        section, _ = personality_section(agent.personality, profile)
        parts.append(f"## Personality\n{section}" if section else "")
    parts.append(render_digest(journal))
    return Frame("\n\n".join(p for p in parts if p), render_full(journal))


def offered_tools(
    registry: ToolRegistry,
    agent: AgentRead,
    *,
    withdrawn: Collection[str] = (),
    forced: ToolChoice | None = None,
) -> list[ToolSpec]:
    """The agent's tools, the journal tools every agent has, less the ones the escalation
    ladder withdrew, plus a tool the loop forces (the ladders' `ask_human`) even when the
    agent does not list it."""
    names = dict.fromkeys([*agent.tools, *JOURNAL_TOOL_NAMES])
    for name in withdrawn:
        names.pop(name, None)
    if forced is not None and forced.name:
        names[forced.name] = None
    return registry.specs(names)
