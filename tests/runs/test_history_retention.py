"""History retention on the real database, runs made by the real commands and workers, the
pruner's clock injected: off by default; a conversation whose runs all settled (with
their transcript closed) before the window is pruned whole, its runs rows kept; never one
with a live run, however old its other runs; not before the window of its latest run; in
chunks of conversations, one transaction each; and the locks that keep a run created or
sent back meanwhile safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.core.config import HistorySettings, load_settings
from app.core.messages import Message, TextBlock
from app.core.model_config import ScriptedFault, ScriptedTurn
from app.core.states import RUN_SETTLED, RunStatus
from app.runs.engine.history_retention import HistoryRetention
from app.runs.engine.reconciler import Reconciler
from app.runs.schemas.runs import RunRead
from app.runs.store import conversations, history, history_retention
from app.runs.store.history_retention import PRUNABLE, Chunk
from app.telemetry.metrics import Metrics
from app.wiring import build_runtime
from tests.support.engine import ManualClock
from tests.support.runs import SAFETY_S, Harness, assert_valid_transcript, call, say
from tests.support.server import make_settings

RETENTION = timedelta(days=30)
# Past the window of every run settled at the test's start: the loop stamps its runs with
# the harness's clock, commands (a cancel) with the real one, a few seconds later at most.
PAST = RETENTION + timedelta(minutes=5)
TICK = timedelta(microseconds=1)  # timestamptz's resolution


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


@pytest.fixture
def clock(h: Harness) -> ManualClock:
    """The pruner's clock: stands still until a test moves it (or sets it)."""
    return ManualClock(h.clock.now)


def pruner(h: Harness, clock: ManualClock, **options: Any) -> HistoryRetention:
    return HistoryRetention(h.sessionmaker, retention=RETENTION, clock=clock, **options)


async def stored(h: Harness) -> dict[str, int]:
    """History steps by conversation, as stored."""
    async with h.sessionmaker() as session:
        rows = await session.execute(
            text("SELECT conversation_id, count(*) FROM run_history GROUP BY conversation_id")
        )
        return {conversation: count for conversation, count in rows}


async def steps_of(h: Harness, run_id: str) -> int:
    async with h.sessionmaker() as session:
        return len(await history.steps(session, run_id, after=0, limit=10_000))


def failing_once() -> ScriptedTurn:
    """A turn whose first call is refused (400): the run fails for good at once (the
    harness retries no run); a retry's call answers."""
    refused = ScriptedFault(status=400, message="invalid request: bad schema", times=1)
    return ScriptedTurn(text="recovered", fault=refused)


# -- the rule ----------------------------------------------------------------------------


def test_every_settled_status_but_timed_out_is_prunable() -> None:
    """A timed-out run's worker died mid-step: its resume or retry continues from its
    history (checkpoint and tool-call ledger), so it keeps its conversation's."""
    assert RUN_SETTLED - PRUNABLE == {RunStatus.TIMED_OUT}
    assert PRUNABLE == {
        RunStatus.COMPLETED,
        RunStatus.CANCELLED,
        RunStatus.FAILED,
        RunStatus.DEAD_LETTER,
    }


async def test_a_conversation_settled_before_the_window_is_pruned_whole_and_its_runs_stay(
    h: Harness, clock: ManualClock
) -> None:
    agent = await h.agent(call("echo", text="x"), say("done"))
    first = await h.finish(agent, "first")
    second = await h.finish(agent, "second", conversation_id=first.conversation_id)
    failed = await h.finish(await h.agent(failing_once()), "fails")
    cancelled = await h.start(agent, "never runs")
    await h.runs.cancel(cancelled.id)  # queued: cancelled at once
    h.clock.advance(10 * 86_400)
    recent = await h.finish(agent, "ten days later")
    assert [r.status for r in (second, failed, recent)] == [
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.COMPLETED,
    ]
    before = await stored(h)
    old = {first.conversation_id, failed.conversation_id, cancelled.conversation_id}
    assert set(before) == old | {recent.conversation_id}
    async with h.sessionmaker() as session, session.begin():  # as a compaction leaves it
        summary = Message(role="user", content=[TextBlock(text="a summary")])
        await conversations.replace_context(session, first.conversation_id, 1, [summary])
    metrics = Metrics()
    rows = {r.id: await h.run(r.id) for r in (first, second, failed, cancelled)}

    clock.now += PAST  # past the window of all but the recent one
    pruned = await pruner(h, clock, metrics=metrics).run_once()

    assert pruned == sum(before[c] for c in old)
    assert await stored(h) == {recent.conversation_id: before[recent.conversation_id]}
    for run_id, row in rows.items():
        assert await steps_of(h, run_id) == 0
        assert await h.messages(row.conversation_id) == []
        assert await h.run(run_id) == row  # the row, as it settled
    assert rows[cancelled.id].status is RunStatus.CANCELLED
    assert (rows[second.id].result, rows[second.id].iteration) == ("done", 2)
    async with h.sessionmaker() as session:  # its compacted context went with the transcript
        assert await conversations.read_context(session, first.conversation_id) == ([], -1)
    samples = metrics.registry.get_sample_value
    assert samples("loopwright_history_steps_pruned_total") == pruned
    assert samples("loopwright_history_conversations_pruned_total") == 3
    assert await pruner(h, clock).run_once() == 0  # nothing more


async def test_a_conversation_continued_after_its_prune_starts_anew(
    h: Harness, clock: ManualClock
) -> None:
    agent = await h.agent(call("echo", text="x"), say("done"))
    first = await h.finish(agent, "first")
    clock.now += PAST
    assert await pruner(h, clock).run_once() > 0

    again = await h.finish(agent, "again", conversation_id=first.conversation_id)
    assert again.status is RunStatus.COMPLETED
    messages = await h.messages(first.conversation_id)
    assert [m.position for m in messages] == [0, 1, 2, 3]
    assert {m.run_id for m in messages} == {again.id}
    assert_valid_transcript(messages)
    [sent, *_] = h.llm_calls[agent.id][2:]  # the continuation's first call saw only its input
    assert sent.request.messages == [Message.user_text("again")]


async def test_a_failed_run_retried_after_its_prune_starts_over_from_its_input(
    h: Harness, clock: ManualClock
) -> None:
    failed = await h.finish(await h.agent(failing_once()), "try this")
    assert failed.status is RunStatus.FAILED
    clock.now += PAST
    assert await pruner(h, clock).run_once() > 0

    await h.runs.retry(failed.id)
    await h.drain()
    done = await h.run(failed.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "recovered")
    messages = await h.messages(failed.conversation_id)
    assert [m.content for m in messages] == [
        [TextBlock(text="try this")],
        [TextBlock(text="recovered")],
    ]


# -- never under a live run ----------------------------------------------------------------


async def _live_run(h: Harness, kind: RunStatus, conversation_id: str) -> RunRead:
    """A run in `kind` on the conversation, made as the service makes one."""
    if kind is RunStatus.QUEUED:
        return await h.start(await h.agent(say("later")), "queued", conversation_id=conversation_id)
    if kind is RunStatus.RUNNING:
        run = await h.start(
            await h.agent(call("gate"), say("through")), conversation_id=conversation_id
        )
        h.drain_in_background()
        async with asyncio.timeout(SAFETY_S):
            await h.tools.gate_entered.wait()  # inside its tool call, holding the lane
        return await h.run(run.id)
    asks = await h.agent(call("ask_human", question="go on?"), say("done"))
    run = await h.finish(asks, "ask me", conversation_id=conversation_id)
    assert run.status is RunStatus.WAITING_ON_HUMAN
    if kind is RunStatus.TIMED_OUT:
        async with h.sessionmaker() as session, session.begin():  # as if it died running
            await session.execute(
                text(
                    "UPDATE runs SET status = 'running', lease_owner = 'gone', lease_token = 1, "
                    "lease_expires_at = now() - interval '1 second' WHERE id = :id"
                ),
                {"id": run.id},
            )
        await Reconciler(h.sessionmaker, h.bus, h.runs, auto_resume=False).run_once()
    return await h.run(run.id)


async def _settle(h: Harness, run: RunRead) -> None:
    """Let the live run end as it would."""
    if run.status is RunStatus.WAITING_ON_HUMAN:
        await h.runs.cancel(run.id)
    elif run.status is RunStatus.RUNNING:
        h.tools.gate_release.set()
        await h.wait_until_settled([run.id])
    else:
        await h.drain()


@pytest.mark.parametrize(
    "kind",
    [RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING_ON_HUMAN, RunStatus.TIMED_OUT],
)
async def test_never_a_conversation_with_a_live_run_however_old_its_others(
    h: Harness, clock: ManualClock, kind: RunStatus
) -> None:
    first = await h.finish(await h.agent(say("done")), "long ago")
    live = await _live_run(h, kind, first.conversation_id)
    assert live.status is kind
    before = await stored(h)
    transcript = await h.messages(first.conversation_id)
    assert before and transcript

    clock.now += 365 * timedelta(days=1)  # even a year on
    assert await pruner(h, clock).run_once() == 0
    assert await stored(h) == before
    assert await h.messages(first.conversation_id) == transcript
    if kind is RunStatus.TIMED_OUT:  # kept until a person resumes or retries it
        return

    await _settle(h, live)
    assert (await h.run(live.id)).status in PRUNABLE
    steps = sum((await stored(h)).values())
    assert await pruner(h, clock).run_once() == steps
    assert await stored(h) == {}


# -- the window ----------------------------------------------------------------------------


async def test_not_before_the_window_of_the_conversations_latest_run(
    h: Harness, clock: ManualClock
) -> None:
    agent = await h.agent(say("done"))
    first = await h.finish(agent, "first")
    h.clock.advance(10 * 86_400)
    latest = await h.finish(agent, "ten days later", conversation_id=first.conversation_id)
    assert latest.finished_at is not None
    before = await stored(h)

    clock.now += PAST  # past the first run's window, not the latest's
    assert await pruner(h, clock).run_once() == 0
    clock.now = latest.finished_at + RETENTION  # the last instant of the window
    assert await pruner(h, clock).run_once() == 0
    assert await stored(h) == before

    clock.now += TICK
    assert await pruner(h, clock).run_once() == before[first.conversation_id]
    assert await stored(h) == {}


# -- chunks --------------------------------------------------------------------------------


async def test_chunks_of_conversations_one_transaction_each_until_none_is_left(
    h: Harness, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = await h.agent(say("done"))
    settled = [await h.finish(agent, f"conversation {n}") for n in range(5)]
    live = await h.start(agent, "queued")  # a conversation of its own, skipped in passing
    expected = await stored(h)
    chunks: list[tuple[Chunk, int]] = []
    prune_chunk = history_retention.prune_chunk

    async def counted(session: AsyncSession, *args: Any, **kwargs: Any) -> Chunk:
        chunk = await prune_chunk(session, *args, **kwargs)
        transaction = await session.scalar(text("SELECT pg_current_xact_id()::text"))
        chunks.append((chunk, int(transaction)))
        return chunk

    monkeypatch.setattr(history_retention, "prune_chunk", counted)
    clock.now += PAST

    pruned = await pruner(h, clock, chunk=2).run_once()

    assert [(c.picked, c.conversations) for c, _ in chunks] == [(2, 2), (2, 2), (1, 1)]
    assert all(c.steps == sum(expected[i] for i in _picked(c, settled)) for c, _ in chunks)
    assert len({transaction for _, transaction in chunks}) == 3
    ordered = sorted(r.conversation_id for r in settled)  # the pass walks them in id order
    assert [c.last for c, _ in chunks] == [ordered[1], ordered[3], ordered[4]]
    assert pruned == sum(expected.values()) - expected[live.conversation_id]
    assert await stored(h) == {live.conversation_id: expected[live.conversation_id]}

    chunks.clear()
    assert await pruner(h, clock, chunk=2).run_once() == 0
    assert [(c.picked, c.conversations) for c, _ in chunks] == [(0, 0)]


def _picked(chunk: Chunk, runs: list[RunRead]) -> list[str]:
    """The conversations among `runs` a chunk covered: up to its cursor, after the one
    before (the chunks are contiguous in id order)."""
    ordered = sorted(r.conversation_id for r in runs)
    end = ordered.index(chunk.last) + 1 if chunk.last else 0
    return ordered[end - chunk.picked : end]


# -- the locks -----------------------------------------------------------------------------


async def test_a_run_being_created_on_the_conversation_makes_the_chunk_skip_it(
    h: Harness, clock: ManualClock
) -> None:
    first = await h.finish(await h.agent(say("done")), "long ago")
    before = await stored(h)
    clock.now += PAST
    async with h.sessionmaker() as creating, creating.begin():
        # A create that inserted its run and has not committed yet: the pruner cannot see
        # the run, but the insert's foreign key check holds the conversation's row.
        await creating.execute(
            text(
                "INSERT INTO runs (id, agent_id, conversation_id, lane, input, multitask, "
                "status, iteration, usage, attempt, metadata, cancel_requested, lease_token, "
                "resume_available, version, created_at, updated_at) "
                "SELECT 'run_new', agent_id, conversation_id, lane, 'more', multitask, "
                "'queued', 0, usage, 1, metadata, false, 0, false, 1, now(), now() "
                "FROM runs WHERE id = :id"
            ),
            {"id": first.id},
        )
        assert await pruner(h, clock).run_once() == 0
        await creating.rollback()  # the create failed after all
    assert await stored(h) == before
    assert await pruner(h, clock).run_once() == before[first.conversation_id]


async def test_a_run_created_while_a_chunk_holds_the_conversation_waits_for_it(
    h: Harness, clock: ManualClock
) -> None:
    first = await h.finish(await h.agent(say("done")), "long ago")
    clock.now += PAST
    async with h.sessionmaker() as session, session.begin():
        chunk = await history_retention.prune_chunk(session, clock.now - RETENTION, limit=10)
        assert (chunk.picked, chunk.conversations) == (1, 1)
        # A run's insert checks its conversation with FOR KEY SHARE: it would wait here.
        async with h.sessionmaker() as creating:
            with pytest.raises(DBAPIError, match="could not obtain lock"):
                await creating.execute(
                    text("SELECT 1 FROM conversations WHERE id = :id FOR KEY SHARE NOWAIT"),
                    {"id": first.conversation_id},
                )
    assert await stored(h) == {}


class Meddling:
    """A session that lets `between` run after the chunk's first statement (the pick),
    before its locks on the runs and its delete."""

    def __init__(self, session: AsyncSession, between: Callable[[], Awaitable[object]]) -> None:
        self._session = session
        self._between: Callable[[], Awaitable[object]] | None = between

    async def scalars(self, *args: Any, **kwargs: Any) -> Any:
        result = await self._session.scalars(*args, **kwargs)
        if self._between is not None:
            between, self._between = self._between, None
            await between()
        return result

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return await self._session.execute(*args, **kwargs)


async def test_a_run_sent_back_to_the_queue_after_the_pick_keeps_its_conversation(
    h: Harness, clock: ManualClock
) -> None:
    failed = await h.finish(await h.agent(failing_once()), "try this")
    before = await stored(h)
    transcript = await h.messages(failed.conversation_id)
    clock.now += PAST

    async def retry() -> None:  # a person retries it, committed before the chunk's locks
        assert (await h.runs.retry(failed.id)).status is RunStatus.QUEUED

    async with h.sessionmaker() as session, session.begin():
        meddled = cast(AsyncSession, Meddling(session, retry))
        chunk = await history_retention.prune_chunk(meddled, clock.now - RETENTION, limit=10)
    assert chunk == Chunk(1, failed.conversation_id, 0, 0)  # picked, then left alone
    assert await stored(h) == {failed.conversation_id: before[failed.conversation_id] + 1}

    await h.drain()  # it continues from its history
    assert (await h.run(failed.id)).status is RunStatus.COMPLETED
    assert (await h.messages(failed.conversation_id))[: len(transcript)] == transcript


async def test_a_run_another_transaction_holds_keeps_its_conversation_for_this_pass(
    h: Harness, clock: ManualClock
) -> None:
    failed = await h.finish(await h.agent(failing_once()), "try this")
    before = await stored(h)
    clock.now += PAST
    async with h.sessionmaker() as retrying, retrying.begin():  # as a retry or resume does
        await retrying.execute(
            text("SELECT 1 FROM runs WHERE id = :id FOR UPDATE"), {"id": failed.id}
        )
        async with h.sessionmaker() as session, session.begin():
            chunk = await history_retention.prune_chunk(session, clock.now - RETENTION, limit=10)
        assert (chunk.picked, chunk.conversations, chunk.steps) == (1, 0, 0)
    assert await stored(h) == before
    assert await pruner(h, clock).run_once() == before[failed.conversation_id]


# -- the component -------------------------------------------------------------------------


async def test_the_pruner_passes_at_start_up_then_on_its_interval(
    h: Harness, clock: ManualClock
) -> None:
    await h.finish(await h.agent(say("done")))
    clock.now += PAST
    waits: list[float] = []
    first_pass_done = asyncio.Event()

    async def sleep(interval_s: float) -> None:
        waits.append(interval_s)
        first_pass_done.set()
        await asyncio.Event().wait()  # until stop() cancels it

    component = pruner(h, clock, interval_s=60, sleep=sleep)
    component.start()
    async with asyncio.timeout(SAFETY_S):
        await first_pass_done.wait()
    await component.stop()

    assert waits == [60]
    assert await stored(h) == {}


def _component_names(database_url: str, db: AsyncEngine, **history: object) -> list[str]:
    settings = make_settings(database_url, history=history)
    return [c.name for c in build_runtime(settings, database_url, db).components]


async def test_off_by_default_no_pruner_is_built(database_url: str, clean_db: AsyncEngine) -> None:
    assert HistorySettings().retention is None
    assert load_settings().history.retention is None
    assert "history retention" not in _component_names(database_url, clean_db)
    names = _component_names(database_url, clean_db, retention_s=86_400)
    after = names.index("idempotency sweep") + 1
    assert names[after] == "history retention"


@pytest.mark.own_server  # reads the rows behind its server through the engine tier's fixtures
async def test_a_pruned_run_still_reads_through_the_api(
    client: httpx.AsyncClient, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    model = {"provider": "scripted", "name": "scripted", "script": [{"text": "done"}]}
    agent = await client.post("/v1/agents", json={"name": "a", "model": model})
    assert agent.status_code == 201, agent.text
    created = await client.post("/v1/runs", json={"agent_id": agent.json()["id"], "input": "go"})
    assert created.status_code == 202, created.text
    run_id, conversation_id = created.json()["id"], created.json()["conversation_id"]
    settled = await client.get(f"/v1/runs/{run_id}/wait", params={"timeout_s": 20})
    assert settled.json()["status"] == "completed", settled.text
    messages = f"/v1/conversations/{conversation_id}/messages"
    assert len((await client.get(messages)).json()) == 2

    later = ManualClock(datetime.now(UTC) + RETENTION + timedelta(minutes=1))
    assert await HistoryRetention(sessionmaker, retention=RETENTION, clock=later).run_once() > 0

    again = await client.get(f"/v1/runs/{run_id}")
    assert again.status_code == 200
    assert {k: again.json()[k] for k in ("status", "result", "iteration")} == {
        "status": "completed",
        "result": "done",
        "iteration": 1,
    }
    pruned = await client.get(messages)
    assert (pruned.status_code, pruned.json()) == (200, [])


# -- settings ------------------------------------------------------------------------------


def test_the_window_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_HISTORY__RETENTION_S", "2592000")
    monkeypatch.setenv("LOOPWRIGHT_HISTORY__PRUNE_INTERVAL_S", "600")
    monkeypatch.setenv("LOOPWRIGHT_HISTORY__PRUNE_CHUNK", "50")
    settings = load_settings().history
    assert (settings.retention, settings.prune_interval_s, settings.prune_chunk) == (
        RETENTION,
        600,
        50,
    )


@pytest.mark.parametrize(
    "values",
    [
        {"retention_s": 3_599},  # an hour at least: a window in minutes is a typo
        {"retention_s": 0},
        {"retention_s": "a month"},
        {"prune_interval_s": 0},
        {"prune_chunk": 0},
        {"prune_chunk": 10_001},
    ],
)
def test_settings_out_of_bounds_are_refused(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        HistorySettings.model_validate(values)
