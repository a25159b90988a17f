"""A loop kind added from outside `app/`: a registry with the test's loop for a declared
kind, given to the workers, drives a real run of an agent of that kind on the real
database (the recipe in docs/architecture.md, "A loop kind")."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from app.agents.schemas import AgentCreate
from app.core.messages import Message
from app.core.model_config import ModelConfig
from app.core.states import RunStatus
from app.core.vocabulary import ExecutionLoopKind
from app.runs.loop import terminators
from app.runs.loop.kinds.protocol import LoopHost
from app.runs.loop.kinds.registry import AGENTS_CHOICE, LOOP_KINDS, LoopKinds
from app.runs.schemas.runs import LoopSelection
from tests.support.runs import Harness, say

REDRAFT = "Improve your draft, then answer."


class Redraft:
    """A kind of the test's own: the model drafts without tools, is asked once to improve
    the draft, and its second answer is the run's."""

    async def drive(self, host: LoopHost) -> None:
        stop = terminators.first_stop(host.at_boundary())
        if stop is not None:
            await host.stop(stop)
            return
        draft = await host.call_llm(with_tools=False)
        await host.record_turn(draft, after=[Message.user_text(REDRAFT)], run_values={}, events=[])
        if not await host.record_response(await host.call_llm(with_tools=False)):
            raise AssertionError("a text answer settles the run")


async def test_a_registered_loop_drives_the_runs_of_its_kind(clean_db: AsyncEngine) -> None:
    kinds = LoopKinds({**LOOP_KINDS.loops, ExecutionLoopKind.PLAN_EXECUTE: Redraft})
    async with Harness.open(clean_db, loop_kinds=kinds) as h:
        script = [say("a first draft"), say("the final answer")]
        agent = await h.agents.create(
            AgentCreate(
                name="redrafter",
                model=ModelConfig(provider="scripted", name="scripted", script=script),
                execution_loop=ExecutionLoopKind.PLAN_EXECUTE,
            )
        )
        run = await h.finish(agent, "Write a haiku.")
        transcript = await h.transcript(run.conversation_id)

    assert run.status is RunStatus.COMPLETED
    assert run.result == "the final answer"
    assert run.execution_loop == LoopSelection(
        kind=ExecutionLoopKind.PLAN_EXECUTE, reason=AGENTS_CHOICE
    )
    assert [(m.role, m.content[0].text) for m in transcript] == [  # type: ignore[union-attr]
        ("user", "Write a haiku."),
        ("assistant", "a first draft"),
        ("user", REDRAFT),
        ("assistant", "the final answer"),
    ]
