"""A conversation that outgrows its model's context window. Before each LLM call the loop
measures the live context and, past 70 % of the window, climbs the recovery ladder: R1
folds older messages into a summary (cheap model, a background call), R2 prunes deeper,
R3 forces an `ask_human` call. A failing summary model degrades to truncation. The
transcript stays complete all along; only the live context is compacted.

Tools here return pages of ~200 tokens; the agent rotates three of them so that neither
tool-loop detection nor the stagnation detector has anything to say."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentRead, Limits
from app.core.config import CompactionSettings
from app.core.messages import Message, TextBlock
from app.core.model_config import ScriptedTurn
from app.core.states import RunStatus
from app.events.store import StoredEvent
from app.llm import tokens
from app.llm.provider import LLMRequest, ProviderError, ToolChoice
from app.runs.loop.compaction import ASK_HUMAN_QUESTION, PIN_PREFIX
from app.runs.loop.summary import SUMMARY_SYSTEM_PROMPT
from app.runs.store import conversations
from tests.support.runs import Harness, assert_valid_transcript, call, say, tool_results
from tests.support.scenarios import (
    ScriptAndSummaries,
    Summarise,
    add_page_tools,
    of_type,
    scripted_agent,
)

TOOLS = ["read_orders", "read_invoices", "read_shipments"]
PAGE_CHARS = 800
WINDOW = 3_000
BUDGET = int(WINDOW * 0.7)
SETTINGS = CompactionSettings(keep_last_messages=6, deep_prune_keep_messages=2, pin_max_chars=200)
TASK = "Check that every order was invoiced and shipped."
SUMMARY = "Summary: orders, invoices and shipments read so far all match."


def reading(pages: int) -> list[ScriptedTurn]:
    """An agent that reads one page after another, rotating its three tools."""
    return [call(TOOLS[n % len(TOOLS)], page=n) for n in range(pages)]


async def reader(
    h: Harness, script: Sequence[ScriptedTurn], summarise: Summarise, **limits: int
) -> tuple[AgentRead, ScriptAndSummaries]:
    add_page_tools(h, TOOLS, PAGE_CHARS)
    agent = await scripted_agent(
        h, *script, tools=TOOLS, context_window=WINDOW, limits=Limits(**limits)
    )
    model = ScriptAndSummaries(agent, summarise)
    h.models[agent.id] = model
    return agent, model


def summarised(request: LLMRequest) -> str:
    return SUMMARY


def main_requests(h: Harness, agent: AgentRead) -> list[LLMRequest]:
    """The agent's own LLM calls (the summariser's go through the same model double)."""
    return [c.request for c in h.llm_calls[agent.id] if c.request.system != SUMMARY_SYSTEM_PROMPT]


def size(request: LLMRequest) -> int:
    return tokens.count_request(request.system, request.messages, request.tools)


def recoveries(events: Sequence[StoredEvent]) -> list[tuple[str, str, str | None]]:
    """(event, stage, method) of each recovery action, in order."""
    kinds = {"agent.compaction.run", "agent.recovery.fired"}
    return [(e.type, e.data["stage"], e.data.get("method")) for e in events if e.type in kinds]


def opening_text(messages: Sequence[Message]) -> str:
    first = messages[0].content[0]
    assert isinstance(first, TextBlock)
    return first.text


def has_pin(message: Message) -> bool:
    """Whether a compaction pinned a tool's latest result into this (opening) message."""
    return any(isinstance(b, TextBlock) and b.text.startswith(PIN_PREFIX) for b in message.content)


async def test_a_growing_conversation_is_compacted_then_pruned_then_a_human_is_asked(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, compaction=SETTINGS) as h:
        agent, model = await reader(h, reading(40), summarised)
        paused = await h.finish(agent, TASK)

        events = await h.events(paused.id)
        assert recoveries(events) == [
            ("agent.compaction.run", "R1", "summary"),
            ("agent.recovery.fired", "R2", "summary"),
            ("agent.recovery.fired", "R3", None),
        ]
        [r1] = of_type(events, "agent.compaction.run")
        r2, r3 = of_type(events, "agent.recovery.fired")
        for step in (r1, r2):
            assert step["tokens_before"] > BUDGET >= step["tokens_after"]
            assert step["messages_before"] > step["messages_after"]
        assert r1["iteration"] < r2["iteration"] < r3["iteration"]
        assert r3["question"] == ASK_HUMAN_QUESTION and r3["tokens_before"] > BUDGET

        # Each recovery is committed with a `compaction` checkpoint before the LLM call.
        kinds = await h.checkpoint_kinds(paused.id)
        assert kinds.count("compaction") == 3
        assert all(kinds[i + 1] == "llm_response" for i, k in enumerate(kinds) if k == "compaction")

        requests = main_requests(h, agent)
        at = {step["iteration"]: step for step in (r1, r2)}
        for turn, request in enumerate(requests):
            assert_valid_transcript(request.messages)  # no tool_use parted from its result
            if turn in at:  # the first request after a compaction is smaller than the last
                before = requests[turn - 1]
                assert len(request.messages) < len(before.messages)
                assert size(request) < size(before)
                assert size(request) == at[turn]["tokens_after"]
        # Until the human was asked, no request the model received went over the threshold.
        assert all(size(r) <= BUDGET for r in requests[:-1])

        after_r1 = requests[r1["iteration"]]
        assert opening_text(after_r1.messages).startswith(
            f"[Compacted: {r1['folded']} earlier messages summarised]"
        )
        assert SUMMARY in opening_text(after_r1.messages)
        assert has_pin(after_r1.messages[0])
        assert opening_text(requests[r2["iteration"]].messages).startswith("[Deep pruned:")
        assert [r.model for r in model.summary_requests] == [SETTINGS.summary_model] * 2

        # R3: the next call is forced to ask the human, who is asked.
        forced = requests[-1]
        assert forced.tool_choice == ToolChoice(type="tool", name="ask_human")
        assert ASK_HUMAN_QUESTION in forced.messages[-1].text
        assert paused.status is RunStatus.WAITING_ON_HUMAN
        assert paused.waiting_for is not None and paused.waiting_for.tool == "ask_human"

        # The transcript keeps every message; the live context is the compacted one.
        transcript = await h.messages(paused.conversation_id)
        assert transcript[0].content == [TextBlock(text=TASK)]
        assert len(tool_results(transcript)) == len(requests) - 1  # every page, answered
        assert_valid_transcript(transcript[:-1])  # the last is the pending ask_human call
        async with h.sessionmaker() as session:
            context, through = await conversations.read_context(session, paused.conversation_id)
        assert through == len(transcript) - 1
        assert opening_text(context).startswith("[Deep pruned:")
        assert len(context) < len(transcript)


async def test_after_four_recovery_actions_the_run_goes_on_to_its_iteration_limit(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, compaction=SETTINGS) as h:
        agent, _ = await reader(h, reading(40), summarised, max_iterations=30)
        paused = await h.finish(agent)
        assert paused.status is RunStatus.WAITING_ON_HUMAN  # R3 asked
        await h.runs.respond(paused.id, "Keep going, skip the shipments.")
        await h.drain()
        done = await h.run(paused.id)

        assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "max_iterations")
        events = await h.events(done.id)
        # The human's answer restarts the ladder: R1 again, then no more recoveries.
        assert [stage for _, stage, _ in recoveries(events)] == ["R1", "R2", "R3", "R1"]
        # Past the cap the context stays over budget: the requests go out as they are.
        assert sum(1 for r in main_requests(h, agent) if size(r) > BUDGET) > 1
        # One `compaction` checkpoint per recovery action, none for the skipped ones.
        assert (await h.checkpoint_kinds(done.id)).count("compaction") == 4
        assert_valid_transcript(await h.messages(done.conversation_id))


def not_found(request: LLMRequest) -> str:
    raise ProviderError("not_found", f"model: {request.model} not found", status=404)


async def test_a_failing_summary_model_degrades_to_truncation_then_stops_being_asked(
    clean_db: AsyncEngine,
) -> None:
    # Every over-budget check two or more iterations after the last one starts at R1.
    settings = SETTINGS.model_copy(
        update={"escalation_window_iterations": 1, "max_recovery_actions": 10}
    )
    async with Harness.open(clean_db, compaction=settings) as h:
        agent, model = await reader(h, reading(40), not_found, max_iterations=22)
        done = await h.finish(agent)

        assert (done.status, done.stop_reason) == (RunStatus.COMPLETED, "max_iterations")
        events = await h.events(done.id)
        steps = recoveries(events)
        assert len(steps) >= 4
        assert set(steps) == {("agent.compaction.run", "R1", "truncation")}
        # Three failed summary calls in a row; from then on the run only truncates.
        assert len(model.summary_requests) == 3
        assert of_type(events, "agent.llm.retry") == []  # a 404 is not worth another attempt
        assert h.sleeps == []

        requests = main_requests(h, agent)
        for step in of_type(events, "agent.compaction.run"):
            first = requests[step["iteration"]].messages[0]
            assert opening_text([first]).startswith(
                f"[Compacted: earlier history was truncated; {step['folded']} messages dropped]"
            )
            assert has_pin(first)
        assert all(size(r) <= BUDGET for r in requests)
        assert_valid_transcript(await h.messages(done.conversation_id))


def overloaded(request: LLMRequest) -> str:
    raise ProviderError("overloaded", "Overloaded", status=529)


async def test_an_overloaded_summary_model_fails_fast_and_compaction_truncates(
    clean_db: AsyncEngine,
) -> None:
    async with Harness.open(clean_db, compaction=SETTINGS) as h:
        agent, model = await reader(h, [*reading(8), say("All matched.")], overloaded)
        done = await h.finish(agent)

        assert (done.status, done.result) == (RunStatus.COMPLETED, "All matched.")
        events = await h.events(done.id)
        assert recoveries(events) == [("agent.compaction.run", "R1", "truncation")]
        # The summary is a background call: one attempt, no retry, no wait.
        assert len(model.summary_requests) == 1
        assert of_type(events, "agent.llm.retry") == []
        assert h.sleeps == []
        assert_valid_transcript(await h.messages(done.conversation_id))


async def test_the_run_journal_counts_against_the_context_budget(clean_db: AsyncEngine) -> None:
    """The journal rides in every request (digest in the system prompt, the full text
    before the live messages), so the threshold must be measured with it: no request the
    model receives may go past 70 % of the window while compaction could prevent it."""
    finding = "the widget count matches the ledger. " * 25  # ~250 tokens each
    notes = [
        call("append_run_journal_entry", section="verified_findings", text=f"{n}: {finding}")
        for n in range(2)
    ]
    async with Harness.open(clean_db, compaction=SETTINGS) as h:
        agent, _ = await reader(h, [*notes, *reading(7), say("All matched.")], summarised)
        done = await h.finish(agent)

        assert recoveries(await h.events(done.id))  # the context did outgrow the budget
        requests = main_requests(h, agent)
        assert "## Verified findings\n- 0: the widget count" in requests[-1].messages[0].text
        over = [
            (turn, size(r))
            for turn, r in enumerate(requests)
            if size(r) > BUDGET and r.tool_choice is None  # R3's forced call may be over
        ]
        assert over == [], f"requests over the {BUDGET}-token budget: {over}"
