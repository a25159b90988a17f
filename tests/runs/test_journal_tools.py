"""The journal tools on the real database, called through the tool runner as the loop calls
them: writes land with a `journal_update` checkpoint in the same transaction, under the
run's lease (a worker that lost it writes nothing), a re-run of the same tool call adds
nothing, and arguments that do not fit the schema come back as clear error results."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import Message, TextBlock, ToolUseBlock
from app.core.states import RunStatus
from app.core.vocabulary import StepKind
from app.runs.loop.retry import ToolRetryPolicy
from app.runs.loop.tool_runner import ToolOutcome, ToolRunner
from app.runs.schemas.journal import Journal
from app.runs.schemas.runs import RunRead
from app.runs.store import history
from app.runs.store import journal as journal_store
from app.runs.store import runs as run_store
from app.runs.tools.base import ToolContext
from app.runs.tools.builtins import BuiltinServices
from app.runs.tools.journal_tools import journal_tools
from app.runs.tools.registry import ToolRegistry
from tests.support.runs import Harness, say


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


@pytest.fixture
async def claimed(h: Harness) -> RunRead:
    """A run held by worker "w1", as a worker's loop holds it while its tools run."""
    # The agent lists no tools: the journal tools need no permission.
    await h.start(await h.agent(say("unused: no worker runs it"), tools=[]))
    async with h.sessionmaker.begin() as session:
        (run,) = await run_store.claim_runs(session, owner="w1", limit=1, ttl_s=60)
    return run


class Journaling:
    """Calls journal tools for one run, each as the tool call `call_id`."""

    def __init__(self, h: Harness, run: RunRead) -> None:
        self.h = h
        self.runner = ToolRunner(ToolRegistry(journal_tools()), ToolRetryPolicy())
        self.context = ToolContext(
            run_id=run.id,
            tool_call_id="",
            agent_id=run.agent_id,
            conversation_id=run.conversation_id,
            services=BuiltinServices(h.runs, h.sessionmaker, h.bus),
            lease_owner=run.lease_owner,
            lease_token=run.lease_token,
        )

    async def call(self, call_id: str, tool: str, **arguments: Any) -> ToolOutcome:
        async def no_retries(data: dict[str, Any]) -> None:
            raise AssertionError(f"journal tools are not retried: {data}")

        return await self.runner.run(
            ToolUseBlock(id=call_id, name=tool, input=arguments),
            replace(self.context, tool_call_id=call_id),
            allowed=set(),
            on_retry=no_retries,
        )

    async def journal(self) -> Journal:
        async with self.h.sessionmaker() as session:
            stored = await journal_store.read_journal(session, self.context.conversation_id)
        return Journal.model_validate(stored)

    async def journal_checkpoints(self) -> list[tuple[Any, ...]]:
        """(seq, the watchers' state the checkpoint reads) of each `journal_update` step."""
        async with self.h.sessionmaker() as session:
            steps = await history.steps(session, self.context.run_id, after=0, limit=1000)
            found = []
            for step in steps:
                if step.kind is StepKind.JOURNAL_UPDATE:
                    state = await history.state_at(session, step.run_id, step.seq)
                    assert state is not None
                    found.append((step.seq, state.loop_counters))
            return found


@pytest.fixture
def journaling(h: Harness, claimed: RunRead) -> Journaling:
    return Journaling(h, claimed)


async def test_the_tools_write_the_journal_with_a_checkpoint_in_one_transaction(
    journaling: Journaling,
) -> None:
    # Where the loop stands: one LLM call made, two messages, and the watchers' state at
    # its last resume point.
    context = journaling.context
    watchers = {"error_streak": {"count": 1, "errors": ["boom"]}}
    async with journaling.h.sessionmaker.begin() as session:
        step = history.NewStep(
            context.run_id,
            context.conversation_id,
            StepKind.LLM_RESPONSE,
            RunStatus.RUNNING,
            datetime.now(UTC),
            [
                Message.user_text("Find the leak").model_dump(mode="json"),
                Message(role="assistant", content=[TextBlock(text="Looking into it.")]).model_dump(
                    mode="json"
                ),
            ],
            {"iteration": 1, "loop": watchers, "prompt_hash": "hash"},
        )
        await history.append_locked(session, step)

    update = await journaling.call(
        "c1", "update_run_journal", objective="Find the leak", current_state="Reading logs"
    )
    decision = await journaling.call(
        "c2",
        "append_run_journal_entry",
        section="decisions",
        text="Bisect the last ten commits",
        reasoning="the leak started this week",
    )
    assert (update.is_error, update.content) == (False, "Updated objective, current_state.")
    assert (decision.is_error, decision.content) == (False, "Added to decisions.")

    journal = await journaling.journal()
    assert (journal.objective, journal.current_state) == ("Find the leak", "Reading logs")
    (entry,) = journal.decisions
    assert (entry.text, entry.reasoning) == (
        "Bisect the last ten commits",
        "the leak started this week",
    )
    assert (entry.run_id, entry.tool_call_id) == (journaling.context.run_id, "c2")
    # Each change is a resume point where the last one left the watchers.
    assert [loop for _, loop in await journaling.journal_checkpoints()] == [watchers, watchers]
    # The journal and the last step were written by the same transaction.
    async with journaling.h.sessionmaker() as session:
        same = await session.scalar(
            text(
                "SELECT c.xmin::text = k.xmin::text FROM conversations AS c, run_history AS k "
                "WHERE c.id = :conversation AND k.run_id = :run "
                "AND k.seq = (SELECT max(seq) FROM run_history WHERE run_id = :run)"
            ),
            {"conversation": journaling.context.conversation_id, "run": context.run_id},
        )
    assert same is True

    read = await journaling.call("c3", "get_run_journal")
    assert not read.is_error
    assert "## Objective\nFind the leak" in read.content
    assert "- Bisect the last ten commits\n  Reasoning: the leak started this week" in read.content


async def test_a_re_run_of_the_same_call_changes_nothing(journaling: Journaling) -> None:
    arguments = {"section": "verified_findings", "text": "The cache is never evicted"}
    await journaling.call("c1", "append_run_journal_entry", **arguments)
    again = await journaling.call("c1", "append_run_journal_entry", **arguments)
    assert (again.is_error, again.content) == (
        False,
        "Already recorded: this tool call added its entry before.",
    )
    await journaling.call("c2", "update_run_journal", handoff_next_action="Add eviction")
    repeated = await journaling.call("c2", "update_run_journal", handoff_next_action="Add eviction")
    assert repeated.content == "No change: the journal already says this."

    journal = await journaling.journal()
    assert [e.text for e in journal.verified_findings] == ["The cache is never evicted"]
    assert len(await journaling.journal_checkpoints()) == 2  # one per change, none per repeat

    # A new call with the same words is a new entry.
    await journaling.call("c3", "append_run_journal_entry", **arguments)
    assert len((await journaling.journal()).verified_findings) == 2


async def test_a_worker_that_lost_the_lease_writes_nothing(
    journaling: Journaling, claimed: RunRead
) -> None:
    await journaling.call("c1", "update_run_journal", objective="Before the claim")
    async with journaling.h.sessionmaker.begin() as session:  # another worker claims the run
        await session.execute(
            text(
                "UPDATE runs SET lease_owner = 'w2', lease_token = lease_token + 1 WHERE id = :id"
            ),
            {"id": claimed.id},
        )
    stale = await journaling.call("c2", "update_run_journal", objective="From the stale worker")
    appended = await journaling.call(
        "c3", "append_run_journal_entry", section="blockers", text="stale"
    )
    for outcome in (stale, appended):
        assert outcome.is_error
        assert outcome.content == (
            "Error: this run no longer holds its lease; the journal was not changed"
        )
    assert (await journaling.journal()).objective == "Before the claim"
    assert (await journaling.journal()).blockers == ()
    assert len(await journaling.journal_checkpoints()) == 1


async def test_a_context_without_a_lease_cannot_write(journaling: Journaling) -> None:
    journaling.context = replace(journaling.context, lease_owner=None, lease_token=None)
    outcome = await journaling.call("c1", "update_run_journal", objective="x")
    assert outcome.is_error and "holds its lease" in outcome.content
    assert (await journaling.journal()).is_empty()


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        (
            "append_run_journal_entry",
            {"section": "todo", "text": "x"},
            "Error: invalid arguments: section: Input should be 'verified_findings', "
            "'decisions', 'artifacts', 'open_questions' or 'blockers'",
        ),
        (
            "append_run_journal_entry",
            {"section": "decisions", "text": "Use Postgres"},
            "Error: invalid arguments: arguments: Value error, a decision needs its `reasoning`",
        ),
        (
            "append_run_journal_entry",
            {"section": "blockers", "text": "   "},
            "Error: invalid arguments: text: String should have at least 1 character",
        ),
        (
            "update_run_journal",
            {"objective": "x", "mood": "great"},
            "Error: invalid arguments: mood: Extra inputs are not permitted",
        ),
        (
            "update_run_journal",
            {},
            "Error: invalid arguments: arguments: Value error, give at least one of "
            "objective, current_state, handoff_next_action",
        ),
        (
            "get_run_journal",
            {"section": "blockers"},
            "Error: invalid arguments: section: Extra inputs are not permitted",
        ),
    ],
)
async def test_arguments_outside_the_schema_are_clear_errors(
    journaling: Journaling, tool: str, arguments: dict[str, Any], message: str
) -> None:
    outcome = await journaling.call("c1", tool, **arguments)
    assert (outcome.is_error, outcome.content) == (True, message)
    assert (await journaling.journal()).is_empty()
    assert await journaling.journal_checkpoints() == []
