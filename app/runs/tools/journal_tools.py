"""The journal tools: `get_run_journal`, `update_run_journal` and
`append_run_journal_entry`.

Every agent has them without listing them: the loop shows the journal to every model, and
a tool can only touch its own run's conversation, under the run's lease, so there is no
capability to grant or withhold. Writes are idempotent by tool call: a call re-run after a
crash sets the same fields again or finds the entry it already added, so resume may re-run
them and nothing is duplicated.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.runs.engine.journal import render_markdown
from app.runs.schemas.journal import Journal, JournalEntry, ListSection
from app.runs.store import journal as journal_store
from app.runs.tools.base import Tool, ToolContext, ToolFailure, define_tool, parse_arguments
from app.runs.tools.builtins import BuiltinServices

FieldText = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2_000)]
EntryText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1_000)]


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FieldsUpdate(BaseModel):
    """Top-level fields to overwrite; an empty string clears one."""

    model_config = ConfigDict(extra="forbid")

    objective: FieldText | None = Field(None, description="The task, in your own words.")
    current_state: FieldText | None = Field(None, description="Where the work is right now.")
    handoff_next_action: FieldText | None = Field(
        None, description="One line: what should happen next if you stop here."
    )

    @model_validator(mode="after")
    def _something_to_set(self) -> FieldsUpdate:
        if not self.model_dump(exclude_none=True):
            raise ValueError("give at least one of objective, current_state, handoff_next_action")
        return self


class NewEntry(BaseModel):
    """An entry for one of the list sections; decisions carry their reasoning."""

    model_config = ConfigDict(extra="forbid")

    section: ListSection
    text: EntryText
    reasoning: EntryText | None = Field(None, description="Why: required for decisions only.")

    @model_validator(mode="after")
    def _reasoning_with_decisions(self) -> NewEntry:
        if self.section == "decisions" and self.reasoning is None:
            raise ValueError("a decision needs its `reasoning`")
        if self.section != "decisions" and self.reasoning is not None:
            raise ValueError("only decisions keep a `reasoning`; put it in `text`")
        return self


def _sessions(context: ToolContext) -> async_sessionmaker[AsyncSession]:
    if not isinstance(context.services, BuiltinServices):
        raise ToolFailure("the run journal is not available here")
    return context.services.sessionmaker


async def _change(context: ToolContext, change: Callable[[Journal], Journal]) -> bool:
    """Apply `change` to the journal under the run's lease, with its `journal_update`
    step, in one transaction. False when it changed nothing (a repeated call), and
    then nothing is written."""
    if context.lease_owner is None or context.lease_token is None:
        raise ToolFailure("the run journal can only be written by a run that holds its lease")
    async with _sessions(context).begin() as session:
        leased = await journal_store.lock_for_run(
            session, context.run_id, owner=context.lease_owner, token=context.lease_token
        )
        if leased is None:
            raise ToolFailure("this run no longer holds its lease; the journal was not changed")
        journal = Journal.model_validate(leased.journal)
        changed = change(journal)
        if changed == journal:
            return False
        stored = changed.model_dump(mode="json")
        await journal_store.write_journal(session, leased, stored, datetime.now(UTC))
        return True


async def _get(context: ToolContext, arguments: dict[str, Any]) -> str:
    parse_arguments(NoArguments, arguments)
    async with _sessions(context)() as session:
        stored = await journal_store.read_journal(session, context.conversation_id)
    journal = Journal.model_validate(stored or {})
    return "The run journal is empty." if journal.is_empty() else render_markdown(journal)


async def _update(context: ToolContext, arguments: dict[str, Any]) -> str:
    values = parse_arguments(FieldsUpdate, arguments).model_dump(exclude_none=True)
    if await _change(context, lambda journal: journal.model_copy(update=values)):
        return f"Updated {', '.join(values)}."
    return "No change: the journal already says this."


async def _append(context: ToolContext, arguments: dict[str, Any]) -> str:
    new = parse_arguments(NewEntry, arguments)
    entry = JournalEntry(
        text=new.text,
        reasoning=new.reasoning,
        run_id=context.run_id,
        tool_call_id=context.tool_call_id,
    )
    if await _change(context, lambda journal: journal.with_entry(new.section, entry)):
        return f"Added to {new.section}."
    return "Already recorded: this tool call added its entry before."


JOURNAL_TOOL_NAMES = ("get_run_journal", "update_run_journal", "append_run_journal_entry")
JOURNAL_WRITERS = frozenset(JOURNAL_TOOL_NAMES[1:])


def journal_tools() -> list[Tool]:
    """Safe to re-run and needing no permission (see the module docstring)."""
    options: dict[str, Any] = {
        "idempotent": True,
        "destructive": False,
        "requires_permission": False,
    }
    return [
        define_tool(
            "get_run_journal",
            "Read your run journal: the working memory you keep for this conversation.",
            NoArguments.model_json_schema(),
            _get,
            **options,
        ),
        define_tool(
            "update_run_journal",
            "Set top-level fields of your run journal: objective, current_state, "
            "handoff_next_action. Fields you leave out keep their value.",
            FieldsUpdate.model_json_schema(),
            _update,
            **options,
        ),
        define_tool(
            "append_run_journal_entry",
            "Add an entry to a list section of your run journal: verified_findings, "
            "decisions (with reasoning), artifacts, open_questions or blockers.",
            NewEntry.model_json_schema(),
            _append,
            **options,
        ),
    ]
