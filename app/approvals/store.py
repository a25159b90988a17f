"""Approval rows: idempotent inserts, compare-and-set decisions, lists, the queries the
expiry and convergence sweeps read, and what a tool call's context summary is made of."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.models import APPROVALS
from app.approvals.schemas import ApprovalRead
from app.core.states import RUN_TERMINAL, ApprovalStatus, RunStatus, TaskStatus, WaitReason
from app.core.vocabulary import ApprovalKind
from app.runs.models import AGENTS, RUNS
from app.tasks.models.tasks import TASKS, TRANSITIONS

_PENDING = ApprovalStatus.PENDING.value
# How far back a tool call's summary looks for what the agent said (assistant messages).
INTENT_WINDOW = 20


def _read(row: Any) -> ApprovalRead:
    return ApprovalRead.model_validate(row._mapping)


async def insert_approval(session: AsyncSession, values: dict[str, Any]) -> ApprovalRead | None:
    """The new approval, or None when one asking the same thing exists already."""
    row = (
        await session.execute(
            insert(APPROVALS).values(**values).on_conflict_do_nothing().returning(*APPROVALS.c)
        )
    ).first()
    return _read(row) if row else None


async def lock_reviews_of(session: AsyncSession, task_id: str) -> None:
    """Serialise the askers of one task's reviews until the transaction ends."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"review:{task_id}"}
    )


async def get_approval(
    session: AsyncSession, approval_id: str, *, lock: bool = False
) -> ApprovalRead | None:
    stmt = select(APPROVALS).where(APPROVALS.c.id == approval_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    return _read(row) if row else None


async def update_approval(
    session: AsyncSession, approval_id: str, *, read_version: int, values: dict[str, Any]
) -> ApprovalRead | None:
    """Compare-and-set on `version`: None when the approval changed since it was read."""
    row = (
        await session.execute(
            update(APPROVALS)
            .where(APPROVALS.c.id == approval_id, APPROVALS.c.version == read_version)
            .values(**values, version=read_version + 1)
            .returning(*APPROVALS.c)
        )
    ).first()
    return _read(row) if row else None


async def list_approvals(
    session: AsyncSession, *, after_id: str | None, limit: int, filters: dict[str, str]
) -> list[ApprovalRead]:
    stmt = select(APPROVALS).order_by(APPROVALS.c.id).limit(limit)
    for column, value in filters.items():
        stmt = stmt.where(APPROVALS.c[column] == value)
    if after_id is not None:
        stmt = stmt.where(APPROVALS.c.id > after_id)
    return [_read(r) for r in await session.execute(stmt)]


async def count_pending(session: AsyncSession) -> int:
    """How many approvals wait on a person."""
    stmt = select(func.count()).select_from(APPROVALS).where(APPROVALS.c.status == _PENDING)
    return int((await session.execute(stmt)).scalar_one())


async def tool_approval(
    session: AsyncSession, run_id: str, tool_call_id: str
) -> ApprovalRead | None:
    row = (
        await session.execute(
            select(APPROVALS).where(
                APPROVALS.c.kind == ApprovalKind.TOOL_CALL,
                APPROVALS.c.run_id == run_id,
                APPROVALS.c.tool_call_id == tool_call_id,
            )
        )
    ).first()
    return _read(row) if row else None


async def agent_name(session: AsyncSession, agent_id: str) -> str | None:
    name = await session.scalar(select(AGENTS.c.name).where(AGENTS.c.id == agent_id))
    return str(name) if name is not None else None


async def stated_intent(
    session: AsyncSession, conversation_id: str, run_id: str, tool_call_id: str
) -> str | None:
    """The run's latest assistant text up to the call: the text beside the call in the
    message that made it, else that of an earlier message of the run (a model may say
    what it plans, then call tools over several turns). None when it said nothing."""
    rows = await session.scalars(
        text(
            "SELECT m.message -> 'content' FROM run_history AS h CROSS JOIN LATERAL "
            "jsonb_array_elements(h.messages) WITH ORDINALITY AS m(message, ord) "
            "WHERE h.run_id = :run AND h.messages IS NOT NULL "
            "AND m.message ->> 'role' = 'assistant' "
            "ORDER BY h.seq DESC, m.ord DESC LIMIT :window"
        ),
        {"run": run_id, "window": INTENT_WINDOW},
    )
    newest_first: list[list[dict[str, Any]]] = list(rows)
    # Messages after the call's own (none while the loop is still at the call) are later.
    start = next(
        (
            i
            for i, content in enumerate(newest_first)
            if any(b.get("type") == "tool_use" and b.get("id") == tool_call_id for b in content)
        ),
        0,
    )
    for content in newest_first[start:]:
        texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        said = " ".join(t.strip() for t in texts if t.strip())
        if said:
            return said
    return None


async def latest_review(session: AsyncSession, task_id: str) -> ApprovalRead | None:
    """The review of the task's latest round."""
    row = (
        await session.execute(
            select(APPROVALS)
            .where(APPROVALS.c.kind == ApprovalKind.TASK_REVIEW, APPROVALS.c.task_id == task_id)
            .order_by(APPROVALS.c.review_round.desc())
            .limit(1)
        )
    ).first()
    return _read(row) if row else None


async def review_rounds(session: AsyncSession, task_id: str) -> int:
    """How many times the task entered review: its current round while it is in review."""
    count = await session.scalar(
        select(func.count())
        .select_from(TRANSITIONS)
        .where(TRANSITIONS.c.task_id == task_id, TRANSITIONS.c.to_status == TaskStatus.IN_REVIEW)
    )
    return int(count or 0)


async def due(session: AsyncSession, now: datetime, *, limit: int) -> list[ApprovalRead]:
    """Pending approvals whose wait ran out, locked; other sweepers skip them."""
    rows = await session.execute(
        select(APPROVALS)
        .where(APPROVALS.c.status == _PENDING, APPROVALS.c.expires_at <= now)
        .order_by(APPROVALS.c.expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [_read(r) for r in rows]


async def stale_pending(session: AsyncSession, *, limit: int) -> list[str]:
    """Pending approvals nobody needs any more: reviews of tasks no longer in review (or
    gone), tool calls of runs that ended."""
    task_status = select(TASKS.c.status).where(TASKS.c.id == APPROVALS.c.task_id).scalar_subquery()
    run_status = select(RUNS.c.status).where(RUNS.c.id == APPROVALS.c.run_id).scalar_subquery()
    stale_review = (APPROVALS.c.kind == ApprovalKind.TASK_REVIEW) & (
        task_status.is_(None) | (task_status != TaskStatus.IN_REVIEW)
    )
    stale_call = (APPROVALS.c.kind == ApprovalKind.TOOL_CALL) & (
        run_status.is_(None) | run_status.in_([s.value for s in RUN_TERMINAL])
    )
    rows = await session.scalars(
        select(APPROVALS.c.id)
        .where(APPROVALS.c.status == _PENDING, stale_review | stale_call)
        .order_by(APPROVALS.c.id)
        .limit(limit)
    )
    return list(rows)


async def answered_waits(session: AsyncSession, *, limit: int) -> list[str]:
    """Runs still waiting on an approval that was decided (the decision came before the
    run's pause was written): they are due their release."""
    approval_id = RUNS.c.waiting_for["approval_id"].astext
    rows = await session.scalars(
        select(RUNS.c.id)
        .join(APPROVALS, APPROVALS.c.id == approval_id)
        .where(
            RUNS.c.status == RunStatus.WAITING_ON_HUMAN,
            RUNS.c.waiting_for["reason"].astext == WaitReason.APPROVAL.value,
            APPROVALS.c.status != _PENDING,
        )
        .order_by(RUNS.c.id)
        .limit(limit)
    )
    return list(rows)
