"""Coordination rows on real Postgres: created at the first phase, one running per parent
task, each phase's result appended in order, nothing recorded once settled, the CHECK
constraints taking exactly the vocabularies, and the rows going with their parent."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import delete, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.coordination import store as coordinations
from app.coordination.schemas import (
    CoordinationRequest,
    Decomposition,
    DispatchOptions,
    PhaseResult,
    SubtaskDraft,
)
from app.core.states import ExecutionStatus
from app.core.vocabulary import CoordinationPhase, CoordinationTopology, PhaseOutcome
from app.db.errors import StaleWrite
from app.tasks.models.tasks import Task
from app.tasks.store import tasks
from tests.support.task_rows import new_task, rows

Phase = CoordinationPhase
REQUEST = CoordinationRequest(
    decomposition=Decomposition(
        subtasks=[SubtaskDraft(title="Design", acceptance_criteria=["a schema exists"])]
    ),
    options=DispatchOptions(max_concurrency_per_wave=2, fail_fast=True),
)


def result(phase: CoordinationPhase, outcome: PhaseOutcome = PhaseOutcome.OK) -> PhaseResult:
    return PhaseResult(
        phase=phase,
        outcome=outcome,
        duration_ms=12,
        detail=phase.value,
        finished_at=datetime(2026, 11, 28, tzinfo=UTC),
    )


@pytest.fixture
async def parent(session: AsyncSession, token: str) -> str:
    await tasks.insert_tasks(session, rows(new_task(f"task_{token}")))
    return f"task_{token}"


async def test_a_coordination_starts_running_at_decompose(
    session: AsyncSession, parent: str, token: str
) -> None:
    made = await coordinations.insert_coordination(session, f"coord_{token}", parent, REQUEST)
    assert (made.status, made.phase, made.topology) == (
        ExecutionStatus.RUNNING,
        Phase.DECOMPOSE,
        None,
    )
    assert made.request == REQUEST and made.phase_results == []
    assert await coordinations.get_coordination(session, made.id, lock=True) == made
    assert await coordinations.running_coordination(session, parent) == made
    assert await coordinations.get_coordination(session, f"coord_{token}_none") is None


async def test_phases_are_recorded_in_order_until_settled(
    session: AsyncSession, parent: str, token: str
) -> None:
    made = await coordinations.insert_coordination(session, f"coord_{token}", parent, REQUEST)
    await coordinations.record_phase(
        session, made.id, result(Phase.DECOMPOSE), at=Phase.DECOMPOSE, next_phase=Phase.ROUTE
    )
    routed = await coordinations.record_phase(
        session, made.id, result(Phase.ROUTE), at=Phase.ROUTE, next_phase=Phase.TOPOLOGY
    )
    resolved = await coordinations.record_phase(
        session,
        made.id,
        result(Phase.TOPOLOGY),
        at=Phase.TOPOLOGY,
        next_phase=Phase.VALIDATE,
        topology=CoordinationTopology.SAS,
    )
    assert [r.phase for r in resolved.phase_results] == [
        Phase.DECOMPOSE,
        Phase.ROUTE,
        Phase.TOPOLOGY,
    ]
    assert (resolved.phase, resolved.topology) == (Phase.VALIDATE, CoordinationTopology.SAS)
    assert resolved.updated_at >= routed.updated_at
    failed = await coordinations.record_phase(
        session,
        made.id,
        result(Phase.VALIDATE, PhaseOutcome.FAILED),
        at=Phase.VALIDATE,
        status=ExecutionStatus.FAILED,
        reason="no subtask could be routed",
    )
    assert (failed.status, failed.phase) == (ExecutionStatus.FAILED, Phase.VALIDATE)
    assert failed.reason == "no subtask could be routed"
    assert await coordinations.get_coordination(session, made.id) == failed
    assert await coordinations.running_coordination(session, parent) is None
    with pytest.raises(StaleWrite, match="is not running"):
        await coordinations.record_phase(
            session, made.id, result(Phase.DISPATCH), at=Phase.VALIDATE
        )


async def test_a_phase_moved_on_elsewhere_is_not_recorded_twice(
    session: AsyncSession, parent: str, token: str
) -> None:
    made = await coordinations.insert_coordination(session, f"coord_{token}", parent, REQUEST)
    await coordinations.record_phase(
        session, made.id, result(Phase.DECOMPOSE), at=Phase.DECOMPOSE, next_phase=Phase.ROUTE
    )
    with pytest.raises(StaleWrite, match="is not running at decompose"):
        await coordinations.record_phase(
            session, made.id, result(Phase.DECOMPOSE), at=Phase.DECOMPOSE, next_phase=Phase.ROUTE
        )
    read = await coordinations.get_coordination(session, made.id)
    assert read is not None and [r.phase for r in read.phase_results] == [Phase.DECOMPOSE]


async def test_one_running_coordination_per_parent(
    session: AsyncSession, parent: str, token: str
) -> None:
    first = await coordinations.insert_coordination(session, f"coord_{token}_1", parent, REQUEST)
    with pytest.raises(IntegrityError, match="uq_coordinations_parent_task_id_running"):
        async with session.begin_nested():
            await coordinations.insert_coordination(session, f"coord_{token}_2", parent, REQUEST)
    await coordinations.record_phase(
        session,
        first.id,
        result(Phase.DECOMPOSE),
        at=Phase.DECOMPOSE,
        status=ExecutionStatus.COMPLETED,
    )
    again = await coordinations.insert_coordination(session, f"coord_{token}_3", parent, REQUEST)
    assert await coordinations.running_coordination(session, parent) == again


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("status", list(ExecutionStatus)),
        ("phase", list(CoordinationPhase)),
        ("topology", list(CoordinationTopology)),
        ("outcome", ["completed", "failed", "cancelled"]),
    ],
)
async def test_the_checks_take_exactly_the_vocabulary(
    session: AsyncSession, parent: str, token: str, column: str, values: list[str]
) -> None:
    made = await coordinations.insert_coordination(session, f"coord_{token}", parent, REQUEST)
    update = text(f"UPDATE coordinations SET {column} = :value WHERE id = :id")
    for value in values:
        await session.execute(update, {"value": value, "id": made.id})
    with pytest.raises(IntegrityError, match=f"ck_coordinations_{column}"):
        async with session.begin_nested():
            await session.execute(update, {"value": "other", "id": made.id})


async def test_deleting_the_parent_deletes_its_coordinations(
    session: AsyncSession, parent: str, token: str
) -> None:
    made = await coordinations.insert_coordination(session, f"coord_{token}", parent, REQUEST)
    await session.execute(delete(Task).where(Task.id == parent))
    assert await coordinations.get_coordination(session, made.id) is None
