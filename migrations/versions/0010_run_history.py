"""run history: one row per boundary of a run replaces its messages, checkpoints and
tool-call ledger rows, and the events of its stream

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection, Row
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_KINDS = (
    "input",
    "llm_response",
    "tool_result",
    "compaction",
    "journal_update",
    "human_pause",
    "final",
    "note",
)
_RUN_STATUSES = (
    "queued",
    "running",
    "waiting_on_human",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
    "dead_letter",
)


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def upgrade() -> None:
    op.create_table(
        "run_history",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("messages", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.CheckConstraint(f"kind IN ({_quoted(_KINDS)})", name=op.f("ck_run_history_kind")),
        sa.CheckConstraint(
            f"status IN ({_quoted(_RUN_STATUSES)})", name=op.f("ck_run_history_status")
        ),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_run_history_seq")),
        sa.CheckConstraint(
            "(position IS NULL) = (messages IS NULL)",
            name=op.f("ck_run_history_messages_have_position"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_history_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "seq", name=op.f("pk_run_history")),
    )
    op.create_index(
        op.f("ix_run_history_conversation_id_position"),
        "run_history",
        ["conversation_id", "position"],
        unique=True,
        postgresql_where=sa.text("position IS NOT NULL"),
    )
    _move_forward(op.get_bind())
    op.drop_table("tool_calls")
    op.drop_index(op.f("ix_messages_conversation_id_position"), table_name="messages")
    op.drop_table("messages")
    op.drop_index(op.f("ix_checkpoints_run_id_id"), table_name="checkpoints")
    op.drop_table("checkpoints")
    op.drop_column("conversations", "message_count")


def downgrade() -> None:
    op.add_column(
        "conversations",
        sa.Column("message_count", sa.Integer(), nullable=False, server_default="0"),
    )
    op.alter_column("conversations", "message_count", server_default=None)
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("message_cursor", sa.Integer(), nullable=False),
        sa.Column("persisted_message_count", sa.Integer(), nullable=False),
        sa.Column("system_prompt_hash", sa.Text(), nullable=False),
        sa.Column(
            "completed_tool_call_ids", postgresql.JSONB(astext_type=sa.Text()), nullable=False
        ),
        sa.Column("loop_counters", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            f"kind IN ({_quoted(_KINDS[:-1])})",
            name=op.f("ck_checkpoints_kind"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_checkpoints_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
    )
    op.create_index(op.f("ix_checkpoints_run_id_id"), "checkpoints", ["run_id", "id"], unique=False)
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("content", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_messages_conversation_id_conversations"),
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_messages_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
    )
    op.create_index(
        op.f("ix_messages_conversation_id_position"),
        "messages",
        ["conversation_id", "position"],
        unique=True,
    )
    op.create_table(
        "tool_calls",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("arguments", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("idempotent", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_tool_calls_run_id_runs")),
        sa.PrimaryKeyConstraint("run_id", "tool_call_id", name=op.f("pk_tool_calls")),
    )
    _move_back(op.get_bind())
    op.drop_index(
        op.f("ix_run_history_conversation_id_position"),
        table_name="run_history",
        postgresql_where=sa.text("position IS NOT NULL"),
    )
    op.drop_table("run_history")


# -- the data --------------------------------------------------------------------------
#
# Both directions work a conversation (upgrade) or a run (downgrade) at a time, in Python:
# the mapping has choices in it that read better as code than as one statement, and the
# rows of one conversation are what one pass needs in memory.

_MESSAGE_CREATED = "message.created"  # made on read from a step's messages, never stored
_SETTLED = frozenset({"completed", "failed", "cancelled", "timed_out", "dead_letter"})
# A person's answer to a run's call: the command completed its ledger row with it.
_ANSWERS = frozenset({"agent_run.human_response", "agent_run.approval_decided"})
_RECOVERY = frozenset({"agent.compaction.run", "agent.recovery.fired"})

_Event = tuple[str, dict[str, Any]]  # (type, data) as a step's `opening` and `events` hold it


# (No dataclasses here: Alembic loads this file as a module outside sys.modules, where
# they cannot read their annotations.)
class _Step:
    """A step of a run's history as the upgrade builds it: `messages` are rows of the old
    `messages` table (consecutive positions), `checkpoint` the old checkpoint a resume
    point comes from (None for a note), `status` None until it is known."""

    def __init__(
        self,
        kind: str,
        at: datetime,
        messages: Sequence[Row[Any]] = (),
        data: dict[str, Any] | None = None,
        status: str | None = None,
        checkpoint: Row[Any] | None = None,
    ) -> None:
        self.kind = kind
        self.at = at
        self.messages = messages
        self.data = data or {}
        self.status = status
        self.checkpoint = checkpoint


class _Group(NamedTuple):
    """Consecutive events of a run's stream written at one time, leaving the run in one
    status: what one boundary of the old loop, or one command, appended. The events' data
    is without `run_id` and `status` (a step's events get them on read)."""

    status: str | None
    at: datetime
    events: list[_Event]


def _move_forward(bind: Connection) -> None:
    """Existing runs' messages, checkpoints, ledger rows and run-stream events become
    history steps, a conversation at a time; then the run streams' events and counters go.

    - Messages: each goes to a run of its conversation: its own, or for one without (run_id
      NULL, or a run of another conversation) the run of the nearest message before it
      that has one, else after it, else the conversation's latest run. (A conversation with
      messages and no run at all stops the upgrade: there is no step to keep them in.)
    - Resume points: one per old checkpoint, in id order, of its kind, with the run's
      messages after the previous checkpoint's `message_cursor` up to its own, `loop` (its
      loop_counters) and `prompt_hash` (its system_prompt_hash). The run's messages after its
      last checkpoint follow in a `note`. A step's messages have consecutive positions: where
      they do not (a message of another run in between), the earlier stretches become
      `note` steps just before it.
    - Events and order: the run's stream is cut into groups (see `_Group`). A group whose
      `message.created` events name the messages of a step not placed yet is that step's:
      its events before them become `opening`, the others `events`, its status and time the
      step's. A step without messages takes the next group that is its own by kind
      (`_owns`). Any other group becomes a `note` of its events, in stream order. A step no
      group claimed comes just before the next one claimed (or at the end), with the status
      of the step before it (the run's, for a first). So the steps come in the run's order,
      each event in its place, and the run's replay is the old stream (but for a
      `message.created` of each message that had none, such as a message without a run).
    - Ledger and counters: see `_record_ledger` and `_record_counters`.

    Not kept: a ledger row's arguments (the call's tool_use in the transcript has them,
    unless a person changed them approving it) and its times (its steps' instead); message
    and checkpoint ids and created_at (a step's time is that of its events); the usage at
    each checkpoint (only the run's total); that a message had no run (the downgrade
    gives it its step's run).
    """
    conversations = bind.execute(sa.text("SELECT id FROM conversations ORDER BY id"))
    for conversation_id in conversations.scalars().all():
        rows = [
            _history_row(run.id, conversation_id, seq, step)
            for run, steps in _conversation_steps(bind, conversation_id)
            for seq, step in enumerate(steps, 1)
        ]
        if rows:
            bind.execute(_INSERT_STEP, rows)
    bind.execute(sa.text("DELETE FROM events WHERE stream LIKE 'run:%'"))
    bind.execute(sa.text("DELETE FROM event_streams WHERE stream LIKE 'run:%'"))


_INSERT_STEP = sa.text(
    "INSERT INTO run_history (run_id, seq, kind, status, at, conversation_id, position, "
    "messages, data) VALUES (:run_id, :seq, :kind, :status, :at, :conversation_id, "
    ":position, CAST(:messages AS jsonb), CAST(:data AS jsonb))"
)


def _conversation_steps(
    bind: Connection, conversation_id: str
) -> Iterator[tuple[Row[Any], list[_Step]]]:
    """Each run of the conversation, in the runs' order, with its steps."""
    runs = bind.execute(
        sa.text(
            "SELECT id, status, iteration, usage FROM runs WHERE conversation_id = :c ORDER BY seq"
        ),
        {"c": conversation_id},
    ).all()
    messages = bind.execute(
        sa.text(
            "SELECT position, run_id, role, content, created_at FROM messages "
            "WHERE conversation_id = :c ORDER BY position"
        ),
        {"c": conversation_id},
    ).all()
    owned = _owned(conversation_id, messages, [run.id for run in runs])
    for run in runs:
        checkpoints = bind.execute(
            sa.text(
                "SELECT kind, iteration, message_cursor, system_prompt_hash, "
                "completed_tool_call_ids, loop_counters, created_at FROM checkpoints "
                "WHERE run_id = :run ORDER BY id"
            ),
            {"run": run.id},
        ).all()
        calls = bind.execute(
            sa.text(
                "SELECT tool_call_id, tool, idempotent, attempts, started_at, completed_at, "
                "result, is_error FROM tool_calls WHERE run_id = :run "
                "ORDER BY started_at, tool_call_id"
            ),
            {"run": run.id},
        ).all()
        events = bind.execute(
            sa.text("SELECT type, data, created_at FROM events WHERE stream = :s ORDER BY seq"),
            {"s": f"run:{run.id}"},
        ).all()
        steps = _placed(_planned(owned[run.id], checkpoints), _groups(events), run.status)
        _record_ledger(steps, calls, run.status)
        _record_counters(steps, run)
        yield run, steps


def _owned(
    conversation_id: str, messages: Sequence[Row[Any]], run_ids: list[str]
) -> dict[str, list[Row[Any]]]:
    """The conversation's messages (in position order) by run, as `_move_forward` says."""
    if messages and not run_ids:
        raise RuntimeError(
            f"conversation {conversation_id} has messages but no run: run_history keeps a "
            "conversation's messages in its runs' steps"
        )
    owners: list[str | None] = [m.run_id if m.run_id in run_ids else None for m in messages]
    # Fill the gaps from the nearest owner before (first pass), then after (second pass).
    for order in (range(len(owners)), range(len(owners) - 1, -1, -1)):
        nearest = None
        for i in order:
            if owners[i] is None:
                owners[i] = nearest
            nearest = owners[i]
    owned: dict[str, list[Row[Any]]] = {run_id: [] for run_id in run_ids}
    for message, owner in zip(messages, owners, strict=True):
        owned[owner or run_ids[-1]].append(message)
    return owned


def _planned(messages: list[Row[Any]], checkpoints: Sequence[Row[Any]]) -> list[_Step]:
    """The run's steps that hold its messages or are its resume points, in order (see
    `_move_forward`)."""
    steps: list[_Step] = []
    rest = messages
    for checkpoint in checkpoints:
        covered = _through(rest, checkpoint.message_cursor)
        rest = rest[len(covered) :]
        *before, own = _stretches(covered) or [[]]
        steps += [_Step("note", stretch[0].created_at, stretch) for stretch in before]
        watchers = {"loop": checkpoint.loop_counters, "prompt_hash": checkpoint.system_prompt_hash}
        steps.append(_Step(checkpoint.kind, checkpoint.created_at, own, watchers, None, checkpoint))
    steps += [_Step("note", stretch[0].created_at, stretch) for stretch in _stretches(rest)]
    return steps


def _through(messages: list[Row[Any]], cursor: int) -> list[Row[Any]]:
    """The first of `messages` (in position order), up to position `cursor` included."""
    count = 0
    while count < len(messages) and messages[count].position <= cursor:
        count += 1
    return messages[:count]


def _stretches(messages: list[Row[Any]]) -> list[list[Row[Any]]]:
    """`messages` (in position order) cut where a position is skipped."""
    stretches: list[list[Row[Any]]] = []
    for message in messages:
        if stretches and stretches[-1][-1].position + 1 == message.position:
            stretches[-1].append(message)
        else:
            stretches.append([message])
    return stretches


def _groups(events: Sequence[Row[Any]]) -> list[_Group]:
    """A run stream's events (in seq order) in their groups (see `_Group`)."""
    groups: list[_Group] = []
    for event in events:
        data = dict(event.data)
        data.pop("run_id", None)
        status = data.pop("status", None)
        if groups and (groups[-1].at, groups[-1].status) == (event.created_at, status):
            groups[-1].events.append((event.type, data))
        else:
            groups.append(_Group(status, event.created_at, [(event.type, data)]))
    return groups


def _placed(planned: list[_Step], groups: list[_Group], run_status: str) -> list[_Step]:
    """The planned steps and the event groups merged into the run's steps (see
    `_move_forward`)."""
    step_of = {m.position: i for i, step in enumerate(planned) for m in step.messages}
    steps: list[_Step] = []
    placed = 0  # planned[placed:] are still to place
    for group in groups:
        named = (
            step_of.get(data.get("position"))
            for kind, data in group.events
            if kind == _MESSAGE_CREATED
        )
        found = min((i for i in named if i is not None and i >= placed), default=None)
        if found is None:
            found = _claimant(planned, placed, group)
        if found is None:
            events = [e for e in group.events if e[0] != _MESSAGE_CREATED]
            if events:  # (only message.created of steps placed before: made on read)
                steps.append(_Step("note", group.at, (), {"events": events}, group.status))
            continue
        steps += planned[placed:found]
        step = planned[found]
        step.status, step.at = group.status, group.at
        step.data |= _opening_and_events(group.events)
        steps.append(step)
        placed = found + 1
    steps += planned[placed:]
    for i, step in enumerate(steps):
        if step.status is None:
            step.status = steps[i - 1].status if i else run_status
    return steps


def _claimant(planned: list[_Step], placed: int, group: _Group) -> int | None:
    """The step without messages, of those next to place, whose own events the group
    holds; steps with messages wait for their `message.created` events."""
    for i in range(placed, len(planned)):
        if planned[i].messages:
            return None
        if _owns(planned[i].kind, group):
            return i
    return None


def _owns(kind: str, group: _Group) -> bool:
    """Whether the group is what the old loop wrote with a resume point of `kind` that has
    no messages: a pause with its question, a run's end, or what the recovery ladder did
    (a journal update wrote no events)."""
    types = {event_type for event_type, _ in group.events}
    if kind == "human_pause":
        return "agent_run.waiting_on_human" in types
    if kind == "final":
        return group.status in _SETTLED
    return kind == "compaction" and bool(types & _RECOVERY)


def _opening_and_events(events: list[_Event]) -> dict[str, list[_Event]]:
    """A step's events around its messages': those before the first `message.created` are
    its `opening`, the others its `events` (all of them, when there is none); keys only
    when not empty."""
    kinds = [event_type for event_type, _ in events]
    first = kinds.index(_MESSAGE_CREATED) if _MESSAGE_CREATED in kinds else 0
    parts = {
        "opening": events[:first],
        "events": [e for e in events[first:] if e[0] != _MESSAGE_CREATED],
    }
    return {key: part for key, part in parts.items() if part}


def _record_ledger(steps: list[_Step], calls: Sequence[Row[Any]], run_status: str) -> None:
    """The run's ledger rows as `started` and `completed` items of its steps, so that
    `ledger()` (app/runs/store/history.py) folds them back to the same tool, idempotent flag,
    attempts, result and is_error.

    A call is started in the first step whose messages hold its tool_use (else where it
    completes, else in the run's last step). An unanswered call started n times is listed
    n times there: the ledger counts its attempts so (an answered call's are its
    completion's). A completed call is completed where `_completion` says."""
    if calls and not steps:  # ledger rows, and nothing else of the run: one note holds them
        steps.append(_Step("note", calls[0].started_at, status=run_status))
    uses: dict[str, int] = {}  # call id -> the step holding its tool_use, in transcript order
    for i, step in enumerate(steps):
        for block in _blocks((m.content for m in step.messages), "tool_use"):
            uses.setdefault(block["id"], i)
    order = {call_id: n for n, call_id in enumerate(uses)}
    for call in sorted(calls, key=lambda c: order.get(c.tool_call_id, len(order))):
        start = uses.get(call.tool_call_id)
        times = max(call.attempts, 1)
        if call.completed_at is not None:
            done = _completion(steps, call, start or 0)
            entry = {"id": call.tool_call_id, "attempts": call.attempts}
            carried = _results(m.content for m in steps[done].messages)
            if carried.get(call.tool_call_id) != (call.result, call.is_error):
                entry |= {"result": call.result, "is_error": call.is_error}
            steps[done].data.setdefault("completed", []).append(entry)
            start, times = (done if start is None else start), 1
        started = {"id": call.tool_call_id, "tool": call.tool, "idempotent": call.idempotent}
        steps[len(steps) - 1 if start is None else start].data.setdefault("started", []).extend(
            [started] * times
        )


def _completion(steps: list[_Step], call: Row[Any], start: int) -> int:
    """The step a completed call is completed in, from the step that starts it on: the
    first whose messages carry its tool_result as the ledger row has it; else, with the
    result in the item, in a step whose messages carry no tool_result of it: the first
    resume point whose checkpoint counted it completed (a human_pause keeps the results of
    its batch's other calls, whose tool_result comes once the run goes on), else the first
    note with a person's answer to it, else the run's last step."""
    call_id = call.tool_call_id
    results = [_results(m.content for m in step.messages) for step in steps]
    later = range(start, len(steps))
    for i in later:
        if results[i].get(call_id) == (call.result, call.is_error):
            return i
    free = [i for i in later if call_id not in results[i]]
    if not free:  # every step from its start carries another result for it
        steps.append(_Step("note", call.completed_at, status=steps[-1].status))
        return len(steps) - 1
    for i in free:
        checkpoint = steps[i].checkpoint
        if checkpoint is not None and call_id in checkpoint.completed_tool_call_ids:
            return i
    for i in free:
        events = [*steps[i].data.get("opening", ()), *steps[i].data.get("events", ())]
        if any(t in _ANSWERS and d.get("tool_call_id") == call_id for t, d in events):
            return i
    return free[-1]


def _record_counters(steps: list[_Step], run: Row[Any]) -> None:
    """`iteration` on each resume point whose checkpoint counted more LLM calls than the
    one before (0, none yet, is not written). The run's own counters, which its last
    checkpoint may trail, on the last step with `iteration` (its last resume point if they
    differ), with `usage`: the old tables kept only the run's total."""
    counted, last = 0, None
    for step in steps:
        if step.checkpoint is not None and step.checkpoint.iteration != counted:
            counted = step.data["iteration"] = step.checkpoint.iteration
            last = step
    usage = run.usage or {}
    if steps and (run.iteration != counted or (last is None and any(usage.values()))):
        resume_points = [s for s in steps if s.checkpoint is not None]
        last = (resume_points or steps)[-1]
        last.data["iteration"] = run.iteration
    if last is not None:
        last.data["usage"] = usage


def _history_row(run_id: str, conversation_id: str, seq: int, step: _Step) -> dict[str, Any]:
    messages = [{"role": m.role, "content": m.content} for m in step.messages]
    return {
        "run_id": run_id,
        "seq": seq,
        "kind": step.kind,
        "status": step.status,
        "at": step.at,
        "conversation_id": conversation_id,
        "position": step.messages[0].position if step.messages else None,
        "messages": json.dumps(messages) if messages else None,
        "data": json.dumps(step.data),
    }


def _blocks(contents: Iterable[list[dict[str, Any]]], block_type: str) -> list[dict[str, Any]]:
    return [block for content in contents for block in content if block["type"] == block_type]


def _results(contents: Iterable[list[dict[str, Any]]]) -> dict[str, tuple[str, bool]]:
    """The tool results messages carry, by call id, as app/runs/store/history.py reads them."""
    return {
        block["tool_use_id"]: (block["content"], block.get("is_error", False))
        for block in _blocks(contents, "tool_result")
    }


# -- back ------------------------------------------------------------------------------


class _OldRows(NamedTuple):
    """What one run's history gives back to the old tables, as rows to insert."""

    messages: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    events: list[dict[str, Any]]


def _move_back(bind: Connection) -> None:
    """History steps become messages, checkpoints, ledger rows and run-stream events, a run
    at a time in the runs' order (see `_old_rows`); then each run stream's counter, and each
    conversation's message_count (its number of messages)."""
    runs = bind.execute(
        sa.text(
            "SELECT r.id FROM runs AS r WHERE EXISTS "
            "(SELECT 1 FROM run_history AS h WHERE h.run_id = r.id) ORDER BY r.seq"
        )
    )
    for run_id in runs.scalars().all():
        steps = bind.execute(
            sa.text(
                "SELECT kind, status, at, conversation_id, position, messages, data "
                "FROM run_history WHERE run_id = :run ORDER BY seq"
            ),
            {"run": run_id},
        ).all()
        old = _old_rows(run_id, steps)
        for statement, rows in (
            (_INSERT_MESSAGE, old.messages),
            (_INSERT_CHECKPOINT, old.checkpoints),
            (_INSERT_TOOL_CALL, old.tool_calls),
            (_INSERT_EVENT, old.events),
        ):
            if rows:
                bind.execute(statement, rows)
    bind.execute(
        sa.text(
            "INSERT INTO event_streams (stream, last_seq) "
            "SELECT stream, max(seq) FROM events WHERE stream LIKE 'run:%' GROUP BY stream "
            "ON CONFLICT (stream) DO UPDATE SET last_seq = excluded.last_seq"
        )
    )
    bind.execute(
        sa.text(
            "UPDATE conversations AS c SET message_count = "
            "(SELECT count(*) FROM messages AS m WHERE m.conversation_id = c.id)"
        )
    )


_INSERT_MESSAGE = sa.text(
    "INSERT INTO messages (conversation_id, position, run_id, role, content, created_at) "
    "VALUES (:conversation_id, :position, :run_id, :role, CAST(:content AS jsonb), :created_at)"
)
_INSERT_CHECKPOINT = sa.text(
    "INSERT INTO checkpoints (run_id, kind, iteration, message_cursor, "
    "persisted_message_count, system_prompt_hash, completed_tool_call_ids, loop_counters, "
    "created_at) VALUES (:run_id, :kind, :iteration, :message_cursor, "
    ":persisted_message_count, :system_prompt_hash, CAST(:completed_tool_call_ids AS jsonb), "
    "CAST(:loop_counters AS jsonb), :created_at)"
)
_INSERT_TOOL_CALL = sa.text(
    "INSERT INTO tool_calls (run_id, tool_call_id, tool, arguments, idempotent, attempts, "
    "started_at, completed_at, result, is_error) VALUES (:run_id, :tool_call_id, :tool, "
    "CAST(:arguments AS jsonb), :idempotent, :attempts, :started_at, :completed_at, :result, "
    ":is_error)"
)
_INSERT_EVENT = sa.text(
    "INSERT INTO events (stream, seq, type, data, created_at) "
    "VALUES (:stream, :seq, :type, CAST(:data AS jsonb), :created_at)"
)


def _old_rows(run_id: str, steps: Sequence[Row[Any]]) -> _OldRows:
    """One run's steps (in seq order) as the old writers kept them:

    - messages: one per message of a step, at its position, with the run's id and the
      step's time;
    - checkpoints: one per resume point (a `note` is none): its kind, the latest iteration
      so far (0: none), the position of the run's last message so far (-1: none) and the
      count it implies, prompt_hash ('' when none), the calls completed so far, its `loop`
      ({} when none), the step's time;
    - tool_calls: the ledger folded as `ledger()` does; the arguments and (for a call
      completed without a start) the tool from the call's tool_use in the run's messages,
      the times of the steps that started and completed it;
    - events, seq 1..n: per step its opening events, a `message.created` per message, its
      other events, each with the run's id and the step's status, at the step's time.
    """
    old = _OldRows([], [], [], [])
    ledger: dict[str, dict[str, Any]] = {}
    completed: list[str] = []  # the calls completed so far, in order
    uses: dict[str, dict[str, Any]] = {}  # the run's tool_use blocks by call id
    iteration, cursor = 0, -1
    loop: dict[str, Any] = {}  # a step records the watchers (and the prompt) when they change
    prompt = ""
    for step in steps:
        data, messages = step.data, step.messages or []
        loop = data.get("loop", loop)
        prompt = data.get("prompt_hash", prompt)
        created: list[_Event] = []
        for n, message in enumerate(messages):
            position = step.position + n
            old.messages.append(
                {
                    "conversation_id": step.conversation_id,
                    "position": position,
                    "run_id": run_id,
                    "role": message["role"],
                    "content": json.dumps(message["content"]),
                    "created_at": step.at,
                }
            )
            created.append(
                (
                    _MESSAGE_CREATED,
                    {"position": position, "role": message["role"], "content": message["content"]},
                )
            )
            cursor = max(cursor, position)
        for block in _blocks((m["content"] for m in messages), "tool_use"):
            uses.setdefault(block["id"], block)
        _fold(ledger, completed, step)
        iteration = data.get("iteration", iteration)
        if step.kind != "note":
            old.checkpoints.append(
                {
                    "run_id": run_id,
                    "kind": step.kind,
                    "iteration": iteration,
                    "message_cursor": cursor,
                    "persisted_message_count": cursor + 1,
                    "system_prompt_hash": prompt,
                    "completed_tool_call_ids": json.dumps(completed),
                    "loop_counters": json.dumps(loop),
                    "created_at": step.at,
                }
            )
        stamp = {"run_id": run_id, "status": step.status}
        for event_type, event_data in [*data.get("opening", ()), *created, *data.get("events", ())]:
            old.events.append(
                {
                    "stream": f"run:{run_id}",
                    "seq": len(old.events) + 1,
                    "type": event_type,
                    "data": json.dumps(stamp | _event_whole(event_type, event_data, step)),
                    "created_at": step.at,
                }
            )
    for call_id, entry in ledger.items():
        use = uses.get(call_id, {})
        old.tool_calls.append(
            entry
            | {
                "run_id": run_id,
                "tool_call_id": call_id,
                "tool": entry["tool"] or use.get("name", ""),
                "arguments": json.dumps(use.get("input", {})),
            }
        )
    return old


def _fold(ledger: dict[str, dict[str, Any]], completed: list[str], step: Row[Any]) -> None:
    """The step's `started`, `completed` and `forgotten` items into `ledger` (rows of
    tool_calls by call id), as `ledger()` in app/runs/store/history.py folds them; the calls it
    completes join `completed`, those it forgets leave."""
    data = step.data
    for started in data.get("started", ()):
        before = ledger.get(started["id"])
        ledger[started["id"]] = {
            "tool": started["tool"],
            "idempotent": started["idempotent"],
            "attempts": before["attempts"] + 1 if before else 1,
            "started_at": step.at,
            "completed_at": None,
            "result": None,
            "is_error": False,
        }
    results = _results(m["content"] for m in step.messages or ())
    for done in data.get("completed", ()):
        call_id = done["id"]
        result, is_error = results.get(call_id) or (done.get("result"), done.get("is_error"))
        before = ledger.get(call_id)
        ledger[call_id] = {
            "tool": before["tool"] if before else "",
            "idempotent": before["idempotent"] if before else False,
            "attempts": done["attempts"],
            "started_at": before["started_at"] if before else step.at,
            "completed_at": step.at,
            "result": result,
            "is_error": bool(is_error),
        }
        if call_id not in completed:
            completed.append(call_id)
    for call_id in data.get("forgotten", ()):
        ledger.pop(call_id, None)
        if call_id in completed:
            completed.remove(call_id)


def _event_whole(event_type: str, data: dict[str, Any], step: Any) -> dict[str, Any]:
    """A step keeps a call's completion as the call's id alone: its fields are the step's
    `completed` entry's, and its result the step's `tool_result` (or the entry's)."""
    if event_type != "tool_call.completed" or "attempts" in data:
        return data
    call_id = data["tool_call_id"]
    done = next(d for d in step.data.get("completed", ()) if d["id"] == call_id)
    block = next(
        (
            b
            for m in step.messages or ()
            for b in m["content"]
            if b["type"] == "tool_result" and b["tool_use_id"] == call_id
        ),
        None,
    )
    result = block["content"] if block else done["result"]
    is_error = block.get("is_error", False) if block else done["is_error"]
    return {
        "tool_call_id": call_id,
        "is_error": is_error,
        "attempts": done["attempts"],
        "result": result[:2_000],
    }
