"""The run journal as the API shows it (`GET /v1/conversations/{id}/journal`)."""

from __future__ import annotations

from app.loop.journal import Journal


class JournalRead(Journal):
    """A conversation's run journal: the working memory its agent keeps with the journal
    tools. After a failed run it is the handoff: the last objective, the state reached and
    the suggested next action. Every section is present, empty until written."""

    conversation_id: str
