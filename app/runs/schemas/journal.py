"""The run journal: a conversation's working memory, which its agent edits on purpose
through the journal tools (`GET /v1/conversations/{id}/journal` shows it)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

ListSection = Literal["verified_findings", "decisions", "artifacts", "open_questions", "blockers"]
LIST_SECTIONS: tuple[ListSection, ...] = get_args(ListSection)


class JournalEntry(BaseModel):
    """One item of a list section, with the run and tool call that wrote it: a tool call
    re-run after a crash finds its entry already there and adds nothing."""

    model_config = ConfigDict(frozen=True)

    text: str
    reasoning: str | None = None  # decisions: why this choice was made
    run_id: str
    tool_call_id: str


class Journal(BaseModel):
    """The sections: three top-level fields the agent overwrites, five lists it
    appends to. An unset field is the empty string; a stored `{}` is the empty journal."""

    model_config = ConfigDict(frozen=True)

    objective: str = ""
    current_state: str = ""
    verified_findings: tuple[JournalEntry, ...] = ()
    decisions: tuple[JournalEntry, ...] = ()
    artifacts: tuple[JournalEntry, ...] = ()
    open_questions: tuple[JournalEntry, ...] = ()
    blockers: tuple[JournalEntry, ...] = ()
    handoff_next_action: str = ""

    def is_empty(self) -> bool:
        return self == Journal()

    def wrote(self, run_id: str, tool_call_id: str) -> bool:
        """Whether this tool call of this run already added an entry (to any section)."""
        return any(
            entry.run_id == run_id and entry.tool_call_id == tool_call_id
            for section in LIST_SECTIONS
            for entry in getattr(self, section)
        )

    def with_entry(self, section: ListSection, entry: JournalEntry) -> Journal:
        """The journal with `entry` appended; unchanged if its tool call already wrote."""
        if self.wrote(entry.run_id, entry.tool_call_id):
            return self
        return self.model_copy(update={section: (*getattr(self, section), entry)})


class JournalRead(Journal):
    """A conversation's run journal: the working memory its agent keeps with the journal
    tools. After a failed run it is the handoff: the last objective, the state reached and
    the suggested next action. Every section is present, empty until written."""

    conversation_id: str
