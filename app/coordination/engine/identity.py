"""The identity of the runs a coordinator makes beside its subtasks' (a peer's debate
round, the synthesis), so that coordinators racing in two processes, or one started again
after a crash, find the run made instead of making it twice.

Each run is created under an idempotency key of its own scope: the coordination and the
run's slot in it (`synthesis`, `peer:<round>:<index>`). The coordinator also records the
run in the coordination in the transaction that creates it, and looks there first; the
key, made with no `run_id`, lasts the clients' window (`IdempotencySettings.
retention_s`), which covers the race between two live coordinators. The subtasks' child
tasks need no key: their ids derive from the coordination (`phases.child_id`).
"""

from __future__ import annotations

from app.db.idempotent_create import CreateKey

RUN_SCOPE = "runs.coordinate"


def run_key(coordination_id: str, slot: str) -> CreateKey:
    """The key of the coordination's run in `slot`. The request hash is the slot itself:
    the run's input (the subtasks' results) is the same on a second try by design, and a
    hash of it would refuse a retry whose results were read a moment later."""
    return CreateKey(RUN_SCOPE, f"{coordination_id}:{slot}", slot)
