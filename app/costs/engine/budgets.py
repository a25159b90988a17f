"""Budget commands: create (with `Idempotency-Key`), change the limit (compare-and-set on
version), delete. An agent's budget must name an agent that exists; a project is any name
(its tasks may come later). One budget per scope, subject and period: a second is a 409."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import Conflict, NotFound, ValidationFailed, VersionConflict
from app.core.ids import new_id
from app.core.vocabulary import BudgetScope
from app.costs.schemas.budgets import BudgetCreate, BudgetPatch, BudgetRead
from app.costs.store import budgets as store
from app.db import idempotency
from app.db.idempotent_create import CreateKey, keyed_create
from app.runs.models import AGENTS

CREATE_SCOPE = "budgets.create"


class BudgetCommands:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        idempotency_retention: timedelta = idempotency.DEFAULT_RETENTION,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._clock = clock
        self._idempotency_retention = idempotency_retention

    def today(self) -> date:
        return self._clock().astimezone(UTC).date()

    async def create_keyed(
        self,
        body: BudgetCreate,
        *,
        idempotency_key: str | None = None,
        request_hash: str | None = None,
    ) -> tuple[BudgetRead, bool]:
        """The budget, and whether this is a replay of the key's first response."""
        key = CreateKey.of(CREATE_SCOPE, idempotency_key, request_hash)
        now = self._clock()
        values = body.model_dump(mode="json") | {
            "id": new_id("bgt"),
            "limit_usd": Decimal(str(body.limit_usd)),
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        try:
            async with self._sessionmaker() as session, session.begin():
                create = await keyed_create(
                    session, key, now=now, retention=self._idempotency_retention
                )
                if create.replay is not None:
                    return BudgetRead.model_validate(create.replay.response), True
                if body.scope is BudgetScope.AGENT:
                    await _agent_exists(session, body.subject)
                budget = await store.insert_budget(session, values, today=self.today())
                await create.remember(budget.id, budget.model_dump(mode="json"))
        except IntegrityError as exc:
            if "uq_budgets_scope_subject_period" not in str(exc.orig):
                raise
            raise Conflict(
                f"{body.scope.value} {body.subject} has a budget for each {body.period.value} "
                "already: "
                "change its limit instead"
            ) from None
        return budget, False

    async def update(
        self, budget_id: str, body: BudgetPatch, *, expected_version: int | None
    ) -> BudgetRead:
        changes = body.model_dump(exclude_unset=True)
        if "limit_usd" in changes:
            changes["limit_usd"] = Decimal(str(changes["limit_usd"]))
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, budget_id, expected_version)
            changed = await store.update_budget(
                session,
                budget_id,
                read_version=current.version,
                values=changes | {"updated_at": self._clock()},
            )
            assert changed  # locked above: the compare-and-set cannot miss
            found = await store.get_budget(session, budget_id, today=self.today())
        assert found is not None
        return found

    async def delete(self, budget_id: str, *, expected_version: int | None) -> None:
        async with self._sessionmaker() as session, session.begin():
            current = await self._current(session, budget_id, expected_version)
            await store.delete_budget(session, budget_id, read_version=current.version)

    async def _current(
        self, session: AsyncSession, budget_id: str, expected_version: int | None
    ) -> BudgetRead:
        current = await store.get_budget(session, budget_id, today=self.today(), lock=True)
        if current is None:
            raise NotFound("budget", budget_id)
        if expected_version is not None and expected_version != current.version:
            raise VersionConflict(expected_version, current.version)
        return current


async def _agent_exists(session: AsyncSession, agent_id: str) -> None:
    found = await session.execute(select(AGENTS.c.id).where(AGENTS.c.id == agent_id))
    if found.first() is None:
        raise ValidationFailed.field("body.subject", f"there is no agent {agent_id!r}")
