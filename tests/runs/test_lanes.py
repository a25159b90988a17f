"""Run lanes on the real database: one active run per lane whatever the workers do, first
come first served within a lane and in parallel across lanes; the multitask policies of a
create on a busy lane; child runs on lanes of their own, and a parent waiting for them
lends its worker slot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Table, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import Block, TextBlock, ToolUseBlock
from app.core.states import RUN_ACTIVE, RunStatus
from app.core.streams import RUNS_STREAM
from app.llm.provider import LLMRequest, LLMResponse, TextSink, Usage, UsageSink
from app.runs.engine.runs import LaneBusy
from app.runs.engine.workers import WorkerPool
from app.runs.models import CONVERSATIONS, RUNS
from app.runs.schemas.runs import RunRead
from app.runs.store import runs as run_store
from tests.support.runs import SAFETY_S, Harness, call, say, tool_results


@pytest.fixture
async def h(clean_db: AsyncEngine) -> AsyncIterator[Harness]:
    async with Harness.open(clean_db) as harness:
        yield harness


def assert_one_after_another(h: Harness, runs: list[RunRead]) -> None:
    """The probe saw these runs strictly one after the other, in the order given."""
    ids = [r.id for r in runs]
    seen = [(step, run_id) for step, run_id in h.tools.trace if run_id in ids]
    assert seen == [(step, run_id) for run_id in ids for step in ("enter", "exit")]


async def hold_lane(h: Harness, lane: str) -> tuple[RunRead, asyncio.Task[None]]:
    """A run that holds `lane` inside the `gate` tool until the test opens the gate."""
    holder = await h.agent(call("gate"), say("holder done"), name="holder")
    run = await h.start(holder, lane=lane)
    drain = h.drain_in_background()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()
    return run, drain


async def count(h: Harness, table: Table) -> int:
    async with h.sessionmaker() as session:
        return int(await session.scalar(select(func.count()).select_from(table)) or 0)


# -- one active run per lane -----------------------------------------------------------


@dataclass
class Intrusions:
    """What was seen on a lane while a probe held it."""

    claimed: list[RunRead] = field(default_factory=list)  # runs a pool claimed meanwhile
    sharing: list[set[str]] = field(default_factory=list)  # other active runs on the lane


def watch_lanes(h: Harness, pools: list[WorkerPool]) -> Intrusions:
    """While a probe holds its lane, every pool tries to claim more work and the lane's
    active runs are read back: a claim that ignored the lane shows up either way."""
    seen = Intrusions()

    async def while_probing(run_id: str) -> None:
        for pool in pools:
            seen.claimed.extend(await pool.claim())
        async with h.sessionmaker() as session:
            active = await session.scalars(
                select(RUNS.c.id).where(
                    RUNS.c.lane == h.tools.lanes[run_id],
                    RUNS.c.status.in_([s.value for s in RUN_ACTIVE]),
                )
            )
            others = set(active) - {run_id}
        if others:
            seen.sharing.append(others)

    h.tools.while_probing = while_probing
    return seen


async def test_one_lane_runs_one_at_a_time_in_creation_order_while_other_lanes_overlap(h):
    await h.listen()
    agent = await h.agent(call("probe"), say("probed"))
    h.tools.overlap_target = 4  # each probe waits until four are inside at once
    lanes = ["lane:shared", "lane:b", "lane:shared", "lane:c", "lane:shared", "lane:d"]
    runs = [await h.start(agent, lane=lane) for lane in lanes]
    # Room for every run at once, so that only the lane can keep the shared ones apart.
    pool = h.new_pool(owner="wide", capacity=len(runs))
    intruders = watch_lanes(h, [pool])
    pool.start()
    settled = await h.wait_until_settled([r.id for r in runs])

    assert {r.status for r in settled} == {RunStatus.COMPLETED}
    assert intruders == Intrusions()
    assert h.tools.max_active["lane:shared"] == 1
    assert h.tools.max_total == 4  # the head of every lane ran alongside the others
    assert_one_after_another(h, [r for r in runs if r.lane == "lane:shared"])


async def test_two_worker_pools_competing_for_one_lane_never_overlap(h):
    await h.listen()
    agent = await h.agent(call("probe"), say("probed"))
    runs = [await h.start(agent, lane="lane:contested") for _ in range(4)]
    pools = [h.new_pool(owner=name, capacity=2) for name in ("a", "b")]
    intruders = watch_lanes(h, pools)
    for pool in pools:
        pool.start()
    settled = await h.wait_until_settled([r.id for r in runs])

    assert {r.status for r in settled} == {RunStatus.COMPLETED}
    assert intruders == Intrusions()
    assert h.tools.max_active["lane:contested"] == 1
    assert_one_after_another(h, runs)


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.WAITING_ON_HUMAN])
async def test_the_database_refuses_a_second_active_run_on_a_lane(h, status):
    agent = await h.agent(say("hi"))
    first = await h.start(agent, lane="lane:one")
    async with h.sessionmaker() as session, session.begin():
        claimed = await run_store.claim_runs(session, owner="test", limit=10, ttl_s=30)
    assert [r.id for r in claimed] == [first.id]

    row = first.model_dump(include=set(RUNS.c.keys()) - {"seq"})
    row |= {"id": "run_intruder", "status": status.value}
    with pytest.raises(IntegrityError, match="uq_runs_active_lane"):
        async with h.sessionmaker() as session, session.begin():
            await session.execute(RUNS.insert().values(**row))
    assert await count(h, RUNS) == 1


# -- multitask policies ----------------------------------------------------------------


async def test_enqueue_waits_behind_the_active_run_and_runs_after_it(h):
    first, drain = await hold_lane(h, "lane:q")
    second = await h.start(await h.agent(say("second")), lane="lane:q", multitask="enqueue")
    assert second.status is RunStatus.QUEUED
    async with h.sessionmaker() as session:
        active, queued = await run_store.lane(session, "lane:q")
    assert active is not None
    assert (active.id, [r.id for r in queued]) == (first.id, [second.id])

    h.tools.gate_release.set()
    await drain
    assert (await h.run(first.id)).status is RunStatus.COMPLETED
    assert (await h.run(second.id)).status is RunStatus.COMPLETED
    board = [(e.type, e.data["run_id"]) for e in await h.stream(RUNS_STREAM)]
    assert board.index(("agent_run.completed", first.id)) < board.index(
        ("agent_run.started", second.id)
    )


async def test_reject_on_a_busy_lane_raises_lane_busy_and_inserts_nothing(h):
    first, drain = await hold_lane(h, "lane:r")
    quick = await h.agent(say("quick"))
    runs, conversations = await count(h, RUNS), await count(h, CONVERSATIONS)
    with pytest.raises(LaneBusy) as refused:
        await h.start(quick, lane="lane:r", multitask="reject")
    assert (refused.value.code, refused.value.status_code) == ("lane_busy", 409)
    assert (refused.value.lane, refused.value.holder) == ("lane:r", first.id)
    assert (await count(h, RUNS), await count(h, CONVERSATIONS)) == (runs, conversations)

    h.tools.gate_release.set()
    await drain
    free = await h.start(quick, lane="lane:r", multitask="reject")  # a free lane accepts
    await h.drain()
    assert (await h.run(free.id)).status is RunStatus.COMPLETED


async def test_interrupt_cancels_the_active_run_at_its_boundary_and_the_queued_ones_now(h):
    active, drain = await hold_lane(h, "lane:i")
    quick = await h.agent(say("quick answer"))
    waiting = await h.start(quick, lane="lane:i")
    newest = await h.start(quick, lane="lane:i", multitask="interrupt")

    assert newest.status is RunStatus.QUEUED
    interrupted = await h.run(active.id)
    assert (interrupted.status, interrupted.cancel_requested) == (RunStatus.RUNNING, True)
    skipped = await h.run(waiting.id)
    assert (skipped.status, skipped.started_at) == (RunStatus.CANCELLED, None)

    h.tools.gate_release.set()
    await drain
    stopped = await h.run(active.id)
    assert (stopped.status, stopped.stop_reason) == (RunStatus.CANCELLED, "cancelled")
    transcript = await h.transcript(active.conversation_id)
    assert [m.role for m in transcript] == ["user", "assistant", "user"]  # result kept
    assert [r.content for r in tool_results(transcript)] == ["the gate opened"]
    done = await h.run(newest.id)
    assert (done.status, done.result) == (RunStatus.COMPLETED, "quick answer")
    assert [run_id for run_id, _ in h.claims] == [active.id, newest.id]


# -- child runs ------------------------------------------------------------------------


class Delegator:
    """A model that spawns children, waits on the ids it was given back, optionally goes
    through the `gate` tool, and reports what they said (a script cannot: its tool inputs
    are fixed in advance)."""

    def __init__(
        self, children: list[dict[str, str]], *, timeout_s: float = 30, then_gate: bool = False
    ) -> None:
        self.children = children
        self.timeout_s = timeout_s
        self.then_gate = then_gate

    async def complete(
        self,
        request: LLMRequest,
        on_text: TextSink | None = None,
        on_usage: UsageSink | None = None,
    ) -> LLMResponse:
        played = sum(1 for m in request.messages if m.role == "assistant")
        last = tool_results(request.messages[-1:])
        content: list[Block]
        if played == 0:
            spawn = {"runs": self.children}
            content = [ToolUseBlock(id="toolu_spawn", name="spawn_child_runs", input=spawn)]
        elif played == 1:
            run_ids = json.loads(last[0].content)["run_ids"]
            wait = {"run_ids": run_ids, "timeout_s": self.timeout_s}
            content = [ToolUseBlock(id="toolu_wait", name="wait_for_child_runs", input=wait)]
        elif played == 2 and self.then_gate:
            content = [ToolUseBlock(id="toolu_gate", name="gate", input={})]
        else:
            waited = tool_results(request.messages)[1]
            content = [TextBlock(text=f"children said: {waited.content}")]
        stop = "end_turn" if isinstance(content[0], TextBlock) else "tool_use"
        return LLMResponse(content=content, stop_reason=stop, usage=Usage(1, 1), model="test")


async def test_a_parent_spawns_children_on_lanes_of_their_own_and_waits_for_their_results(h):
    await h.listen()
    alpha = await h.agent(say("alpha result"), name="alpha")
    beta = await h.agent(say("beta result"), name="beta")
    parent_agent = await h.agent(say("unused"), name="parent")
    h.models[parent_agent.id] = Delegator(
        [{"input": "part a", "agent_id": alpha.id}, {"input": "part b", "agent_id": beta.id}]
    )
    parent = await h.start(parent_agent, "Split the work.")
    h.pool.start()  # capacity 4: the waiting parent and both children at once
    [done] = await h.wait_until_settled([parent.id])

    assert done.status is RunStatus.COMPLETED
    async with h.sessionmaker() as session:
        children = await run_store.list_runs(
            session, start=None, limit=100, filters={"parent_run_id": parent.id}
        )
    assert [(c.parent_run_id, c.status) for c in children] == [(parent.id, RunStatus.COMPLETED)] * 2
    assert len({parent.lane, *(c.lane for c in children)}) == 3
    spawned, waited = tool_results(await h.transcript(parent.conversation_id))
    assert json.loads(spawned.content) == {"run_ids": [c.id for c in children]}
    assert {(w["run_id"], w["status"], w["result"]) for w in json.loads(waited.content)} == {
        (children[0].id, "completed", "alpha result"),
        (children[1].id, "completed", "beta result"),
    }
    assert done.result == f"children said: {waited.content}"


@pytest.mark.parametrize("mode", ["claiming", "draining"])
async def test_a_parent_waiting_for_its_child_lends_it_the_only_slot(h, mode):
    """Capacity 1: the waiting parent does not hold the slot, so its child runs meanwhile
    and the wait ends with the child's result long before its 120 s timeout (the test's
    own safety timeout, far shorter, fails it otherwise)."""
    await h.listen()
    child_agent = await h.agent(say("child result"), name="child")
    parent_agent = await h.agent(say("unused"), name="parent")
    h.models[parent_agent.id] = Delegator(
        [{"input": "part a", "agent_id": child_agent.id}], timeout_s=120
    )
    pool = h.new_pool(capacity=1, owner="pool-one")
    parent = await h.start(parent_agent, "Delegate.")
    if mode == "claiming":
        pool.start()
        [done] = await h.wait_until_settled([parent.id])
    else:
        async with asyncio.timeout(SAFETY_S):
            await pool.run_until_idle()
        done = await h.run(parent.id)

    assert done.status is RunStatus.COMPLETED
    spawned, waited = tool_results(await h.transcript(parent.conversation_id))
    [child_id] = json.loads(spawned.content)["run_ids"]
    assert [(w["run_id"], w["status"], w["result"]) for w in json.loads(waited.content)] == [
        (child_id, "completed", "child result")
    ]
    assert h.claims == [(parent.id, "pool-one"), (child_id, "pool-one")]
    if mode == "draining":  # both loops have ended: the slot is free again, and only it
        assert (pool.in_hand, pool.free_capacity) == ([], 1)


async def test_a_parent_back_from_its_wait_takes_its_slot_back(h):
    """Capacity 1: once its wait is over the parent counts again, so a run queued while it
    still works is not claimed until it has finished; then it is."""
    await h.listen()
    child_agent = await h.agent(say("child result"), name="child")
    third_agent = await h.agent(say("third result"), name="third")
    parent_agent = await h.agent(say("unused"), name="parent")
    h.models[parent_agent.id] = Delegator(
        [{"input": "part a", "agent_id": child_agent.id}], timeout_s=120, then_gate=True
    )
    pool = h.new_pool(capacity=1, owner="pool-one")
    parent = await h.start(parent_agent, "Delegate.")
    pool.start()
    async with asyncio.timeout(SAFETY_S):
        await h.tools.gate_entered.wait()  # the parent is past its wait, in `gate`

    third = await h.start(third_agent, "Next.")
    assert pool.free_capacity <= 0
    assert await pool.claim() == []
    assert (await h.run(third.id)).status is RunStatus.QUEUED

    h.tools.gate_release.set()
    finished, done = await h.wait_until_settled([parent.id, third.id])
    assert (finished.status, done.status, done.result) == (
        RunStatus.COMPLETED,
        RunStatus.COMPLETED,
        "third result",
    )
    _, waited, gated = tool_results(await h.transcript(parent.conversation_id))
    [child] = json.loads(waited.content)
    assert (child["status"], gated.content) == ("completed", "the gate opened")
    assert h.claims == [(run_id, "pool-one") for run_id in (parent.id, child["run_id"], third.id)]
