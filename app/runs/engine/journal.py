"""The run journal: a conversation's working memory, which the
agent edits on purpose through its journal tools, and the two ways the loop shows it back
to the model: a short digest for the system prompt and the full Markdown as a message pair
before the live messages (what survives an iteration-limit halt).
"""

from __future__ import annotations

from app.core.messages import Message, TextBlock
from app.runs.schemas.journal import Journal, JournalEntry

DIGEST_MAX_CHARS = 500
DIGEST_TITLE = "Run journal digest:"
DIGEST_PART_MAX_CHARS = 100  # objective, state, blocker, next action: each at most this
DIGEST_FINDING_MAX_CHARS = 100
DIGEST_FINDING_MIN_CHARS = 30  # a finding cut shorter than this says nothing: leave it out

JOURNAL_INTRO = (
    "This is the run journal you keep for this conversation with the journal tools. It holds "
    "what earlier turns established: continue from it instead of finding it out again."
)
JOURNAL_ACK = "Understood. I will continue from my run journal and keep it up to date."


def render_markdown(journal: Journal) -> str:
    """Every section in a fixed order, empty ones marked as such, so the
    model sees the whole structure it can fill."""

    def field(title: str, text: str) -> str:
        return f"## {title}\n{text.strip() or '(empty)'}"

    def entries(title: str, items: tuple[JournalEntry, ...]) -> str:
        lines = [
            f"- {e.text}" + (f"\n  Reasoning: {e.reasoning}" if e.reasoning else "") for e in items
        ]
        return f"## {title}\n" + ("\n".join(lines) or "(empty)")

    return "\n\n".join(
        [
            "# Run journal",
            field("Objective", journal.objective),
            field("Current state", journal.current_state),
            entries("Verified findings", journal.verified_findings),
            entries("Decisions", journal.decisions),
            entries("Artifacts", journal.artifacts),
            entries("Open questions", journal.open_questions),
            entries("Blockers", journal.blockers),
            field("Next action (handoff)", journal.handoff_next_action),
        ]
    )


def render_full(journal: Journal) -> list[Message]:
    """The full journal as a user/assistant pair to place before the live messages (after
    any history summary); no messages for an empty journal."""
    if journal.is_empty():
        return []
    return [
        Message.user_text(f"{JOURNAL_INTRO}\n\n{render_markdown(journal)}"),
        Message(role="assistant", content=[TextBlock(text=JOURNAL_ACK)]),
    ]


def render_digest(journal: Journal) -> str:
    """At most DIGEST_MAX_CHARS for the system prompt, in order of priority: objective,
    current state, first blocker, next action, then as many of the most recent verified
    findings (newest first) as still fit. Empty when none of these is set."""
    parts = [
        ("Objective", journal.objective),
        ("Current state", journal.current_state),
        ("First blocker", journal.blockers[0].text if journal.blockers else ""),
        ("Next action", journal.handoff_next_action),
    ]
    lines = [
        _clip(f"{label}: {_one_line(text)}", DIGEST_PART_MAX_CHARS)
        for label, text in parts
        if text.strip()
    ]
    # The four parts of at most 100 always fit with the title; findings take what is left.
    room = DIGEST_MAX_CHARS - len(DIGEST_TITLE) - sum(len(line) + 1 for line in lines)
    findings_title = "Recent findings:"
    room -= len(findings_title) + 1  # spent only if a finding follows (nothing comes after)
    findings: list[str] = []
    for entry in reversed(journal.verified_findings):
        if room - 1 < DIGEST_FINDING_MIN_CHARS:
            break
        line = _clip(f"- {_one_line(entry.text)}", min(DIGEST_FINDING_MAX_CHARS, room - 1))
        findings.append(line)
        room -= len(line) + 1
    if findings:
        lines += [findings_title, *findings]
    return "\n".join([DIGEST_TITLE, *lines]) if lines else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
