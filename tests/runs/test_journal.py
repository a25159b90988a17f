"""The run journal carries an agent's working memory past an iteration-limit halt: the
run writes it through the journal tools (a `journal_update` checkpoint each), stops at
`max_iterations`, and the next run of the conversation reads it twice, as a digest in its
system prompt and as the full journal just before the live messages."""

from __future__ import annotations

from app.agents.schemas import Limits
from app.core.messages import TextBlock
from app.core.states import RunStatus
from app.runs.engine.journal import DIGEST_TITLE, JOURNAL_ACK, JOURNAL_INTRO
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results


async def test_a_journal_written_before_max_iterations_feeds_the_next_run(h: Harness) -> None:
    first_agent = await h.agent(
        call("update_run_journal", objective="Find the memory leak", handoff_next_action="bisect"),
        call("append_run_journal_entry", section="verified_findings", text="cache never evicts"),
        say("unreached: the iteration limit comes first"),
        tools=[],  # the journal tools need no listing
        limits=Limits(max_iterations=2),
    )
    first = await h.finish(first_agent, "Why does the worker run out of memory?")

    assert (first.status, first.stop_reason) == (RunStatus.COMPLETED, "max_iterations")
    transcript = await h.messages(first.conversation_id)
    assert not any(r.is_error for r in tool_results(transcript))
    kinds = await h.checkpoint_kinds(first.id)
    assert kinds.count("journal_update") == 2
    assert kinds[-1] == "final"
    # Within the run, the call after the update already carried the digest.
    assert "Objective: Find the memory leak" in h.llm_calls[first_agent.id][1].request.system

    second_agent = await h.agent(say("Bisecting the cache changes next."), tools=[])
    second = await h.finish(second_agent, "Go on.", conversation_id=first.conversation_id)

    assert (second.status, second.stop_reason) == (RunStatus.COMPLETED, "end_turn")
    [seen] = [c.request for c in h.llm_calls[second_agent.id]]
    assert DIGEST_TITLE in seen.system
    assert "Objective: Find the memory leak" in seen.system
    assert "Next action: bisect" in seen.system
    assert "cache never evicts" in seen.system  # the newest finding fits in the digest
    # The full journal comes first, acknowledged, then the conversation as it stands.
    intro, ack, *live = seen.messages
    assert intro.role == "user" and intro.text.startswith(JOURNAL_INTRO)
    assert "## Verified findings\n- cache never evicts" in intro.text
    assert "## Next action (handoff)\nbisect" in intro.text
    assert ack.role == "assistant" and ack.content == [TextBlock(text=JOURNAL_ACK)]
    assert live[0].text == "Why does the worker run out of memory?"
    assert live[-1].text == "Go on."
    # The journal is shown to the model, never written into the transcript.
    messages = await h.transcript(first.conversation_id)
    assert not any(JOURNAL_INTRO in m.text for m in messages)
    assert_valid_transcript(messages)
