"""A subtask's identity: the keys its child task and its run are created under, one per
coordination and index, bound to the subtask's draft."""

from __future__ import annotations

import pytest

from app.core.errors import IdempotencyKeyReused
from app.engine import runs, task_engine
from app.engine.coordination.identity import (
    SUBTASK_RUN_SCOPE,
    SUBTASK_SCOPE,
    subtask_create_key,
    subtask_run_key,
)
from app.schemas.coordination import SubtaskDraft

DRAFT = SubtaskDraft(title="Design the table", acceptance_criteria=["it exists"])
OTHER = SubtaskDraft(title="Design the index", acceptance_criteria=["it exists"])


def test_each_coordination_and_index_has_its_own_key() -> None:
    keys = {
        subtask_create_key(coordination, index, DRAFT).key
        for coordination in ("coord_a", "coord_b")
        for index in range(12)
    }
    assert len(keys) == 24
    assert (
        subtask_create_key("coord_a", 1, DRAFT).key != subtask_create_key("coord_a1", 1, DRAFT).key
    )


def test_a_resumed_coordination_makes_the_same_keys() -> None:
    assert subtask_create_key("coord_a", 3, DRAFT) == subtask_create_key("coord_a", 3, DRAFT)
    assert subtask_run_key("coord_a", 3, DRAFT) == subtask_run_key("coord_a", 3, DRAFT)


def test_the_task_and_the_run_keys_are_apart_from_every_other_scope() -> None:
    task, run = subtask_create_key("c", 0, DRAFT), subtask_run_key("c", 0, DRAFT)
    assert (task.scope, run.scope) == (SUBTASK_SCOPE, SUBTASK_RUN_SCOPE)
    others = {task_engine.CREATE_SCOPE, task_engine.TOOL_CREATE_SCOPE, runs.CREATE_SCOPE}
    assert not {SUBTASK_SCOPE, SUBTASK_RUN_SCOPE} & (others | {runs.SPAWN_SCOPE})


def test_the_same_key_with_another_draft_is_refused() -> None:
    first = subtask_create_key("c", 0, DRAFT)
    record = first.record("task_1", {})
    assert subtask_create_key("c", 0, DRAFT).replays(record) == record
    with pytest.raises(IdempotencyKeyReused):
        subtask_create_key("c", 0, OTHER).replays(record)


def test_the_longest_id_keeps_the_key_within_a_clients_bound() -> None:
    assert len(subtask_create_key("x" * 200, 19, DRAFT).key) <= 255
