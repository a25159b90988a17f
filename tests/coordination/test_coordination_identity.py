"""The keys of a coordination's own runs (peers' rounds, the synthesis): one per
coordination and slot, the same on a second try, in a scope of their own, and within a
client key's bound; and the subtasks' derived task ids."""

from __future__ import annotations

from app.coordination.engine.identity import RUN_SCOPE, run_key
from app.coordination.engine.phases import child_id
from app.runs.engine import runs
from app.tasks.engine import task_engine


def test_each_coordination_and_slot_has_its_own_key() -> None:
    slots = ["synthesis", *(f"peer:{r}:{i}" for r in (1, 2) for i in range(12))]
    keys = {run_key(c, slot).key for c in ("coord_a", "coord_b") for slot in slots}
    assert len(keys) == 2 * len(slots)


def test_a_resumed_coordination_makes_the_same_key_and_replays() -> None:
    first = run_key("coord_a", "peer:1:3")
    assert run_key("coord_a", "peer:1:3") == first
    record = first.record("run_1", {})
    assert run_key("coord_a", "peer:1:3").replays(record) == record


def test_the_scope_is_apart_from_every_other() -> None:
    others = {task_engine.CREATE_SCOPE, task_engine.TOOL_CREATE_SCOPE, runs.CREATE_SCOPE}
    assert RUN_SCOPE not in others | {runs.SPAWN_SCOPE}


def test_the_longest_id_keeps_the_key_within_a_clients_bound() -> None:
    assert len(run_key("x" * 200, "peer:3:19").key) <= 255


def test_child_ids_derive_from_the_coordination_and_index() -> None:
    assert child_id("coord_01ABC", 3) == "task_01ABC_3"
    assert len({child_id(c, i) for c in ("coord_a", "coord_b") for i in range(20)}) == 40
