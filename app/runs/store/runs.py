"""Run rows: inserts, compare-and-set and lease-fenced updates, claiming, lanes, lists."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

from sqlalchemy import and_, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RUN_ACTIVE, RunStatus
from app.db.driver import driver_connection, json_text
from app.runs.models import RUNS
from app.runs.schemas.runs import RunRead

_ACTIVE = [s.value for s in RUN_ACTIVE]
_QUEUED = RunStatus.QUEUED.value
_FAILED = [RunStatus.FAILED.value, RunStatus.DEAD_LETTER.value]


def _read(row: Any) -> RunRead:
    return RunRead.model_validate(dict(row._mapping) | {"metadata_": row._mapping["metadata"]})


async def insert_run(session: AsyncSession, values: dict[str, Any]) -> RunRead:
    row = (await session.execute(RUNS.insert().values(**values).returning(*RUNS.c))).one()
    return _read(row)


async def get_run(session: AsyncSession, run_id: str, *, lock: bool = False) -> RunRead | None:
    stmt = select(RUNS).where(RUNS.c.id == run_id)
    if lock:
        stmt = stmt.with_for_update()
    row = (await session.execute(stmt)).first()
    return _read(row) if row else None


async def cancel_requested(session: AsyncSession, run_id: str) -> bool:
    """Whether a person asked to cancel the run (a run that is gone counts as cancelled)."""
    stmt = select(RUNS.c.cancel_requested).where(RUNS.c.id == run_id)
    flag = (await session.execute(stmt)).scalar_one_or_none()
    return flag is None or bool(flag)


async def update_run(
    session: AsyncSession, run_id: str, *, read_version: int, values: dict[str, Any]
) -> RunRead | None:
    """Compare-and-set on `version`: None when the run changed since it was read. Not for
    the status: that is `set_status`'s, called by the run transitions only."""
    if "status" in values:
        raise ValueError("a run's status changes through app/runs/engine/run_transitions.py")
    return await _compare_and_set(session, run_id, read_version, values)


async def set_status(
    session: AsyncSession,
    run_id: str,
    *,
    read_version: int,
    status: RunStatus,
    values: dict[str, Any],
) -> RunRead | None:
    """`update_run` with a new status (checked against the machine by the caller)."""
    return await _compare_and_set(session, run_id, read_version, {**values, "status": status})


async def _compare_and_set(
    session: AsyncSession, run_id: str, read_version: int, values: dict[str, Any]
) -> RunRead | None:
    row = (
        await session.execute(
            update(RUNS)
            .where(RUNS.c.id == run_id, RUNS.c.version == read_version)
            .values(**values, version=RUNS.c.version + 1, updated_at=func.now())
            .returning(*RUNS.c)
        )
    ).first()
    return _read(row) if row else None


# Columns a worker's boundary may change; any not named in a row's document keep their
# current value (`jsonb_populate_record` over the row itself).
_BOUNDARY_COLUMNS = (
    "status",
    "iteration",
    "usage",
    "error",
    "result",
    "stop_reason",
    "waiting_for",
    "system_prompt_hash",
    "model_downgrade",
    "execution_loop",
    "plan",
    "lease_owner",
    "lease_expires_at",
    "finished_at",
    "attempt",
    "not_before",
    "error_log",
)
# Statements that update many run rows lock them first, in id order: two of them (a
# group's boundaries, a heartbeat's renewals) then wait for each other, never deadlock.
_UPDATE_LEASED_MANY = f"""
    WITH v AS (
        SELECT * FROM jsonb_to_recordset($1::text::jsonb)
            AS v(id text, owner text, token bigint, doc jsonb)
    ), locked AS (
        SELECT q.id FROM runs AS q WHERE q.id IN (SELECT id FROM v)
        ORDER BY q.id FOR NO KEY UPDATE
    )
    UPDATE runs AS r
    SET ({", ".join(_BOUNDARY_COLUMNS)}) = (
            SELECT {", ".join("p." + c for c in _BOUNDARY_COLUMNS)}
            FROM jsonb_populate_record(r, v.doc) AS p),
        version = r.version + 1, updated_at = now()
    FROM v, locked
    WHERE r.id = v.id AND locked.id = r.id AND r.lease_owner = v.owner
      AND r.lease_token = v.token AND r.status = 'running'
    RETURNING r.*
"""


async def update_leased_many(
    session: AsyncSession, writes: Sequence[tuple[str, str, int, dict[str, Any]]]
) -> dict[str, RunRead]:
    """Writes by the workers holding runs' leases, fenced by owner and token, in one
    statement: (run_id, owner, token, values) each. Returns the runs written, by id; a run
    missing from it lost its lease, and nothing of it was written."""
    if not writes:
        return {}
    unknown = {k for *_, values in writes for k in values} - set(_BOUNDARY_COLUMNS)
    if unknown:
        raise ValueError(f"not boundary columns: {sorted(unknown)}")
    rows = json_text(
        [
            {"id": run_id, "owner": owner, "token": token, "doc": values}
            for run_id, owner, token, values in writes
        ]
    )
    driver = await driver_connection(session)
    return {
        r["id"]: RunRead.model_validate({**r, "metadata_": r["metadata"]})
        for r in await driver.fetch(_UPDATE_LEASED_MANY, rows)
    }


# Work to claim, oldest first: the head of each lane that nobody holds and whose backoff
# (if it is a retry) is over. A conversation is continued by one run at a time, in order,
# whatever their lanes (its transcript is appended to by one writer). SKIP LOCKED lets
# claimers in other processes take other rows meanwhile; the unique index on active lanes
# is the final word if two claims of one lane ever race. The new lease token fences any
# previous owner's writes. (Runs whose worker stopped renewing are the reconciler's: it
# times them out and, by policy, requeues them.)
# `started_at` is read off the clock as the row is claimed: `now()` is the transaction's
# start, which may come before the commit that freed the lane.
_CLAIM = text(
    """
    WITH heads AS (
        SELECT q.id, q.seq FROM runs AS q
        WHERE q.status = 'queued'
          AND (q.not_before IS NULL OR q.not_before <= now())
          AND NOT EXISTS (
              SELECT 1 FROM runs AS a
              WHERE a.lane = q.lane AND a.status IN ('running', 'waiting_on_human'))
          AND NOT EXISTS (
              SELECT 1 FROM runs AS e
              WHERE e.lane = q.lane AND e.status = 'queued' AND e.seq < q.seq)
          AND NOT EXISTS (
              SELECT 1 FROM runs AS c
              WHERE c.conversation_id = q.conversation_id
                AND (c.status IN ('running', 'waiting_on_human')
                     OR (c.status = 'queued' AND c.seq < q.seq)))
        ORDER BY q.seq
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ), picked AS (
        SELECT id FROM heads
    )
    UPDATE runs AS r
    SET status = 'running', not_before = NULL, lease_owner = :owner,
        lease_token = r.lease_token + 1,
        lease_expires_at = now() + make_interval(secs => :ttl), heartbeat_at = now(),
        started_at = coalesce(r.started_at, clock_timestamp()), version = r.version + 1,
        updated_at = now()
    FROM picked
    WHERE r.id = picked.id
    RETURNING r.*
    """
)


async def claim_runs(
    session: AsyncSession, *, owner: str, limit: int, ttl_s: float
) -> list[RunRead]:
    rows = await session.execute(_CLAIM, {"owner": owner, "limit": limit, "ttl": ttl_s})
    return sorted((_read(r) for r in rows), key=lambda run: run.created_at)


async def renew_leases(
    session: AsyncSession, *, owner: str, leases: Sequence[tuple[str, int]], ttl_s: float
) -> set[str]:
    """Extend the leases this worker still holds; returns the run ids renewed."""
    if not leases:
        return set()
    rows = await session.execute(
        text(
            "WITH locked AS (SELECT q.id FROM runs AS q WHERE q.id = ANY(CAST(:ids AS text[])) "
            "ORDER BY q.id FOR NO KEY UPDATE) "
            "UPDATE runs AS r SET heartbeat_at = now(), "
            "lease_expires_at = now() + make_interval(secs => :ttl) "
            "FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS bigint[])) AS l(id, token), "
            "locked WHERE r.id = l.id AND locked.id = r.id AND r.lease_token = l.token "
            "AND r.lease_owner = :owner AND r.status = 'running' RETURNING r.id"
        ),
        {
            "ids": [run_id for run_id, _ in leases],
            "tokens": [token for _, token in leases],
            "owner": owner,
            "ttl": ttl_s,
        },
    )
    return {row.id for row in rows}


async def release(
    session: AsyncSession, *, owner: str, leases: Sequence[tuple[str, int]]
) -> list[RunRead]:
    """Give runs back to the queue at shutdown: they keep their place at the head of their
    lane (their seq is the oldest there) and any worker resumes them at once."""
    if not leases:
        return []
    rows = await session.execute(
        text(
            "UPDATE runs AS r SET status = 'queued', lease_owner = NULL, "
            "lease_expires_at = NULL, version = r.version + 1, updated_at = now() "
            "FROM unnest(CAST(:ids AS text[]), CAST(:tokens AS bigint[])) AS l(id, token) "
            "WHERE r.id = l.id AND r.lease_token = l.token AND r.lease_owner = :owner "
            "AND r.status = 'running' RETURNING r.*"
        ),
        {"ids": [i for i, _ in leases], "tokens": [t for _, t in leases], "owner": owner},
    )
    return [_read(r) for r in rows]


async def lane(session: AsyncSession, lane_name: str) -> tuple[RunRead | None, list[RunRead]]:
    """The run holding the lane, and the queued ones in the order they will run."""
    rows = await session.execute(
        select(RUNS)
        .where(RUNS.c.lane == lane_name, RUNS.c.status.in_([*_ACTIVE, RunStatus.QUEUED.value]))
        .order_by(RUNS.c.seq)
    )
    runs = [_read(r) for r in rows]
    active = next((r for r in runs if r.status in RUN_ACTIVE), None)
    return active, [r for r in runs if r.status is RunStatus.QUEUED]


@dataclass(frozen=True)
class BusyLane:
    """A lane that a run holds or waits on: its holder, the head of its queue in the order
    the claim takes it, and how many wait (`delayed`: of those, how many are not to start
    before a time still to come)."""

    lane: str
    oldest_run_id: str  # its oldest unfinished run: the lanes' order, and their cursor
    active: RunRead | None
    queue: list[RunRead]
    queued: int
    delayed: int

    @property
    def runs(self) -> list[RunRead]:
        """Its holder (if one) and the head of its queue, in the order they run."""
        return [self.active, *self.queue] if self.active else list(self.queue)


async def busy_lanes(
    session: AsyncSession,
    *,
    limit: int,
    shown: int,
    after: str | None = None,
    lane: str | None = None,
) -> list[BusyLane]:
    """Lanes with a holder or a queue (or just `lane`), in the order of their oldest
    unfinished run, from just past the lane whose oldest is `after`; each with its holder
    and the first `shown` of its queue. One statement: the lanes, then their runs.

    The queue is in `seq` order, as the claim takes it: its head waits for the lane to be
    free (and for its `not_before`), and everything behind it waits for the head."""
    busy = RUNS.c.status.in_([*_ACTIVE, _QUEUED])
    queued = RUNS.c.status == _QUEUED
    lanes = (
        select(
            RUNS.c.lane,
            func.min(RUNS.c.id).label("oldest_run_id"),
            func.count().filter(queued).label("queued"),
            func.count().filter(queued, RUNS.c.not_before > func.now()).label("delayed"),
        )
        .where(busy)
        .group_by(RUNS.c.lane)
        .order_by(func.min(RUNS.c.id))
        .limit(limit)
    )
    if lane is not None:
        lanes = lanes.where(RUNS.c.lane == lane)
    if after is not None:
        lanes = lanes.having(func.min(RUNS.c.id) > after)
    found = lanes.cte("lanes")
    # Numbered per lane: its queued runs in claim order, its holder (one at most) apart.
    place = func.row_number().over(partition_by=[RUNS.c.lane, queued], order_by=RUNS.c.seq)
    runs = select(RUNS, place.label("place")).where(busy).subquery("busy")
    stmt = (
        select(
            found.c.lane.label("lane_name"),
            found.c.oldest_run_id,
            found.c.queued,
            found.c.delayed,
            runs,
        )
        .select_from(found)
        .outerjoin(
            runs,
            and_(
                runs.c.lane == found.c.lane,
                or_(runs.c.status != _QUEUED, runs.c.place <= shown),
            ),
        )
        .order_by(found.c.oldest_run_id, runs.c.status == _QUEUED, runs.c.seq)
    )
    rows = await session.execute(stmt)
    return [_busy_lane(list(group)) for _, group in groupby(rows, lambda row: row.oldest_run_id)]


def _busy_lane(rows: list[Any]) -> BusyLane:
    """A lane from its rows: one per run shown, or a single one without a run."""
    first = rows[0]
    runs = [_read(row) for row in rows if row.id is not None]
    return BusyLane(
        lane=first.lane_name,
        oldest_run_id=first.oldest_run_id,
        active=next((run for run in runs if run.status in RUN_ACTIVE), None),
        queue=[run for run in runs if run.status is RunStatus.QUEUED],
        queued=first.queued,
        delayed=first.delayed,
    )


async def list_runs(
    session: AsyncSession,
    *,
    start: str | None,
    limit: int,
    filters: dict[str, str],
    newest_first: bool = False,
) -> list[RunRead]:
    """Runs in creation order (ids sort by it), from just past the run `start`."""
    key = RUNS.c.id
    stmt = select(RUNS).order_by(key.desc() if newest_first else key).limit(limit)
    for column, value in filters.items():
        stmt = stmt.where(RUNS.c[column] == value)
    if start is not None:
        stmt = stmt.where(key < start if newest_first else key > start)
    return [_read(r) for r in await session.execute(stmt)]


async def recent_failures(session: AsyncSession, *, limit: int) -> list[RunRead]:
    """The runs that ended in failure (`failed`, `dead_letter`), the last to end first."""
    stmt = (
        select(RUNS)
        .where(RUNS.c.status.in_(_FAILED))
        .order_by(RUNS.c.finished_at.desc().nulls_last(), RUNS.c.id.desc())
        .limit(limit)
    )
    return [_read(r) for r in await session.execute(stmt)]


def finished(now: datetime) -> dict[str, Any]:
    """Columns a run sets when it settles: the lease is released with it."""
    return {"finished_at": now, "lease_owner": None, "lease_expires_at": None}
