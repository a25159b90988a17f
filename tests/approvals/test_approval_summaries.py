"""Context summaries: what a person reads to decide, bounded whatever the inputs are."""

from __future__ import annotations

import json

from app.approvals.engine.approval_summaries import (
    NO_INTENT,
    NO_RESULT,
    NO_RUN,
    abbreviate_arguments,
    clip,
    review_summary,
    tool_call_summary,
)
from app.core.vocabulary import SUMMARY_MAX_CHARS


def test_clip_collapses_whitespace_and_marks_the_cut() -> None:
    assert clip("  two\n\nlines\t here ", 100) == "two lines here"
    assert clip("abcdefghij", 10) == "abcdefghij"
    assert clip("abcdefghijk", 10) == "abcdefghi…"
    assert len(clip("word " * 1000, 50)) == 50


def test_a_tool_call_summary_names_the_agent_its_intent_and_the_arguments() -> None:
    summary = tool_call_summary(
        "mailer",
        "send_email",
        {"to": "ops@example.com", "subject": "Outage"},
        "The deploy failed.\n\nI will tell ops before the window closes.",
    )
    assert summary == (
        "Agent 'mailer' asks to call 'send_email'.\n"
        "Intent: The deploy failed. I will tell ops before the window closes.\n"
        'Arguments: {"to": "ops@example.com", "subject": "Outage"}'
    )


def test_an_agent_that_said_nothing_is_shown_as_such() -> None:
    for intent in (None, "", "  \n "):
        assert f"Intent: {NO_INTENT}" in tool_call_summary("a", "t", {}, intent)


def test_arguments_are_abbreviated_not_dropped() -> None:
    arguments = {
        "body": "x" * 5_000,
        "recipients": [f"user{i}@example.com" for i in range(40)],
        "deep": {"a": {"b": {"c": {"d": 1}}}},
        **{f"k{i}": i for i in range(10)},
    }
    shown = abbreviate_arguments(arguments, 10_000)  # the structure, before the final cut
    parsed = json.loads(shown)
    assert parsed["body"] == "x" * 79 + "…"
    assert parsed["recipients"][:5] == [f"user{i}@example.com" for i in range(5)]
    assert parsed["recipients"][5] == "… 35 more items"
    assert parsed["deep"] == {"a": {"b": "{1 keys}"}}
    assert parsed["…"] == "8 more keys"  # of 13 keys, 5 shown
    assert len(abbreviate_arguments(arguments)) <= 380


def test_every_summary_stays_within_the_bound() -> None:
    huge = "word " * 10_000
    tool = tool_call_summary(huge, "t" * 500, {f"k{i}": huge for i in range(50)}, huge)
    review = review_summary(huge, [huge] * 50, "run_" + "x" * 30, huge)
    assert len(review) <= SUMMARY_MAX_CHARS
    assert len(tool) < SUMMARY_MAX_CHARS  # the parts' budgets alone keep it inside
    # Each part kept its share: a long intent does not crowd out the arguments.
    assert "Intent: word word" in tool and '\nArguments: {"k0": "word word' in tool
    assert review.startswith("Task: word word")
    assert "- … and 45 more" in review
    assert "Result of run run_xxx" in review and review.endswith("…")
    assert len(review.rsplit("Result of run", 1)[1]) > 200  # the result has room


def test_a_review_summary_shows_the_task_and_what_the_run_handed_in() -> None:
    assert review_summary("Ship it", ["Tests pass"], "run_1", "Shipped v2.\n\nAll green.") == (
        "Task: Ship it\nAcceptance criteria:\n- Tests pass\n"
        "Result of run run_1: Shipped v2. All green."
    )
    assert review_summary("Ship it", [], None, None) == (
        f"Task: Ship it\nAcceptance criteria: (none given)\nResult: {NO_RUN}"
    )
    assert review_summary("Ship it", [], "run_1", "") == (
        f"Task: Ship it\nAcceptance criteria: (none given)\nResult of run run_1: {NO_RESULT}"
    )
