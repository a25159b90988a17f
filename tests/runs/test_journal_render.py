"""The run journal shown back to the model: the digest for the system prompt keeps within
its ~500 characters by priority, the full render carries every section, and an entry
re-written by the same tool call is not duplicated."""

from __future__ import annotations

import pytest

from app.runs.engine.journal import (
    DIGEST_MAX_CHARS,
    JOURNAL_ACK,
    render_digest,
    render_full,
    render_markdown,
)
from app.runs.schemas.journal import Journal, JournalEntry


def entry(text: str, call: str = "call-1", run: str = "run-1", **extra: str) -> JournalEntry:
    return JournalEntry(text=text, run_id=run, tool_call_id=call, **extra)


def findings(*texts: str) -> tuple[JournalEntry, ...]:
    return tuple(entry(t, call=f"call-{i}") for i, t in enumerate(texts))


def test_an_empty_journal_adds_nothing_to_the_context() -> None:
    assert render_digest(Journal()) == ""
    assert render_full(Journal()) == []


def test_the_digest_carries_objective_state_first_blocker_next_action_and_new_findings() -> None:
    journal = Journal(
        objective="Fix the flaky checkout test",
        current_state="Reproduced it\nlocally; the clock is suspect",
        blockers=(entry("No access to CI logs", "b1"), entry("Second blocker", "b2")),
        handoff_next_action="Patch the clock fixture",
        verified_findings=findings("The retry is idempotent", "The clock is frozen in CI"),
        decisions=(entry("Use a fake clock", "d1", reasoning="wall clocks are flaky"),),
    )
    assert render_digest(journal).splitlines() == [
        "Run journal digest:",
        "Objective: Fix the flaky checkout test",
        "Current state: Reproduced it locally; the clock is suspect",
        "First blocker: No access to CI logs",
        "Next action: Patch the clock fixture",
        "Recent findings:",
        "- The clock is frozen in CI",
        "- The retry is idempotent",
    ]


@pytest.mark.parametrize(
    ("journal", "present", "absent"),
    [
        # Every part long: each is cut, the newest finding takes what room is left, the
        # older one none.
        (
            Journal(
                objective="o" * 900,
                current_state="s" * 900,
                blockers=(entry("b" * 900),),
                handoff_next_action="n" * 900,
                verified_findings=findings("old " * 50, "new " * 50),
            ),
            ["Objective: ooo", "Current state: sss", "First blocker: bbb", "Next action: nnn"],
            ["old"],
        ),
        # Without the fixed parts, findings fill the digest, newest first, until it is full.
        (
            Journal(verified_findings=findings(*(f"finding {i} " + "x" * 80 for i in range(9)))),
            ["- finding 8", "- finding 7", "- finding 6", "- finding 5"],
            ["finding 0", "finding 1"],
        ),
        # Only sections the digest does not show: the digest stays empty.
        (Journal(decisions=(entry("d", reasoning="r"),), artifacts=(entry("a.txt"),)), [], ["d"]),
    ],
)
def test_the_digest_stays_within_its_limit_by_priority(
    journal: Journal, present: list[str], absent: list[str]
) -> None:
    digest = render_digest(journal)
    assert len(digest) <= DIGEST_MAX_CHARS
    for part in present:
        assert part in digest
    for part in absent:
        assert part not in digest
    if present:
        assert len(digest) > DIGEST_MAX_CHARS - 60  # the room was used, not wasted


def test_the_full_render_is_a_pair_with_every_section_in_order() -> None:
    journal = Journal(
        objective="Ship the report",
        verified_findings=findings("Totals match the ledger"),
        decisions=(entry("Use CSV", "d1", reasoning="the finance team imports it"),),
        artifacts=(entry("reports/q3.csv", "a1"),),
        handoff_next_action="Send it to finance",
    )
    user, assistant = render_full(journal)
    assert (user.role, assistant.role, assistant.text) == ("user", "assistant", JOURNAL_ACK)
    assert user.text.endswith(render_markdown(journal))
    headings = [line for line in user.text.splitlines() if line.startswith("#")]
    assert headings == [
        "# Run journal",
        "## Objective",
        "## Current state",
        "## Verified findings",
        "## Decisions",
        "## Artifacts",
        "## Open questions",
        "## Blockers",
        "## Next action (handoff)",
    ]
    assert "- Use CSV\n  Reasoning: the finance team imports it" in user.text
    assert "## Current state\n(empty)" in user.text
    assert "## Blockers\n(empty)" in user.text


def test_an_entry_is_added_once_per_tool_call_of_a_run() -> None:
    first = Journal().with_entry("blockers", entry("stuck", call="c1", run="r1"))
    assert first.with_entry("blockers", entry("stuck", call="c1", run="r1")) is first
    assert first.with_entry("open_questions", entry("why?", call="c1", run="r1")) is first
    # Another run of the conversation may reuse a provider's call id: that is a new entry.
    again = first.with_entry("blockers", entry("stuck", call="c1", run="r2"))
    assert [e.run_id for e in again.blockers] == ["r1", "r2"]


def test_a_stored_empty_document_is_the_empty_journal() -> None:
    journal = Journal.model_validate({})
    assert journal.is_empty()
    stored = Journal(objective="x").model_dump(mode="json")
    assert Journal.model_validate(stored) == Journal(objective="x")
