"""Pruning of settled history, one chunk of conversations per transaction (the rule and
why: `app/runs/engine/history_retention.py`).

A conversation is pruned whole or not at all: half a transcript, seen by a run continuing
it or by a reader, would be worse than either. A chunk, in one transaction:
1. picks up to `limit` conversations after the cursor (in id order) that have history and
   whose every run is prunable (`PRUNABLE`, finished before `cutoff`), and locks their rows
   `FOR UPDATE SKIP LOCKED`. A run created on one of them from then on waits for the
   chunk to commit: its insert checks its foreign key with `FOR KEY SHARE` on that row;
   a create still in flight already holds that lock, and the conversation is skipped;
2. locks their runs `FOR UPDATE SKIP LOCKED` (in id order), so no retry, resume, cancel
   or claim changes one of them until the chunk commits;
3. deletes their steps and clears their compacted context (`conversations.context`, a
   summary of the transcript whose `through_position` would no longer match it) in one
   statement that re-checks the whole rule with a snapshot taken after both locks: a run
   created or sent back to the queue before the locks is seen there, and a conversation
   with a run the chunk could not lock is left alone.

The runs rows stay (a run reads as it settled: status, result, counters, error log); the
conversation's journal stays too (it is not history).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import RUN_SETTLED, RunStatus

# Settled for good, or at least with the transcript closed: see runs/engine/history_retention.py
# for why a timed-out run is not among them.
PRUNABLE: frozenset[RunStatus] = RUN_SETTLED - {RunStatus.TIMED_OUT}
_PRUNABLE = "(" + ", ".join(f"'{s.value}'" for s in sorted(PRUNABLE)) + ")"

# A run that keeps its conversation's history: live, or settled within the window; in the
# re-check, also one this chunk could not lock.
_KEEPS = f"""
    EXISTS (SELECT 1 FROM runs AS k WHERE k.conversation_id = c.id AND (
        k.status NOT IN {_PRUNABLE} OR k.finished_at IS NULL OR k.finished_at >= :cutoff))
"""
_KEEPS_OR_UNLOCKED = f"""
    EXISTS (SELECT 1 FROM runs AS k WHERE k.conversation_id = c.id AND (
        k.status NOT IN {_PRUNABLE} OR k.finished_at IS NULL OR k.finished_at >= :cutoff
        OR NOT k.id = ANY(CAST(:locked AS text[]))))
"""

_PICK = text(
    f"""
    SELECT c.id FROM conversations AS c
    WHERE c.id > :after
      AND EXISTS (SELECT 1 FROM runs AS r JOIN run_history AS h ON h.run_id = r.id
                  WHERE r.conversation_id = c.id)
      AND NOT {_KEEPS}
    ORDER BY c.id
    LIMIT :limit
    FOR UPDATE OF c SKIP LOCKED
    """
)

_LOCK_RUNS = text(
    "SELECT id FROM runs WHERE conversation_id = ANY(CAST(:conversations AS text[])) "
    "ORDER BY id FOR UPDATE SKIP LOCKED"
)

_PRUNE = text(
    f"""
    WITH pruned AS (
        SELECT c.id FROM conversations AS c
        WHERE c.id = ANY(CAST(:conversations AS text[]))
          AND NOT {_KEEPS_OR_UNLOCKED}
    ), cleared AS (
        UPDATE conversations AS c SET context = NULL
        FROM pruned AS p WHERE c.id = p.id AND c.context IS NOT NULL
    ), deleted AS (
        DELETE FROM run_history AS h USING runs AS r, pruned AS p
        WHERE r.conversation_id = p.id AND h.run_id = r.id
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM pruned) AS conversations,
           (SELECT count(*) FROM deleted) AS steps
    """
)


@dataclass(frozen=True)
class Chunk:
    """What one chunk did. `picked`: the conversations it took (at most the limit; fewer
    means none is left after the cursor); `last`: the last of them, the next cursor."""

    picked: int
    last: str | None
    conversations: int  # pruned
    steps: int  # deleted


async def prune_chunk(
    session: AsyncSession, cutoff: datetime, *, after: str = "", limit: int
) -> Chunk:
    """Prune up to `limit` conversations with an id after `after` whose runs are all
    prunable and finished before `cutoff`, in the caller's transaction (the locks last
    until it ends); conversations another transaction holds are skipped."""
    picked: Sequence[str] = (
        await session.scalars(_PICK, {"after": after, "cutoff": cutoff, "limit": limit})
    ).all()
    if not picked:
        return Chunk(0, None, 0, 0)
    ids = list(picked)
    locked = list((await session.scalars(_LOCK_RUNS, {"conversations": ids})).all())
    row = (
        await session.execute(_PRUNE, {"conversations": ids, "locked": locked, "cutoff": cutoff})
    ).one()
    return Chunk(len(ids), ids[-1], row.conversations, row.steps)
