"""The identity of a coordination's subtasks and of their runs, so that a coordinator
killed mid-dispatch and started again finds what it made instead of making it twice.

Each child task and each run is created under an idempotency key of its own scope
(`app.engine.idempotent_create`): the coordination and the subtask's index. Keyed by the
coordination, not only the parent task, so that coordinating a parent again after its
last coordination settled makes new subtasks. The request hash is the subtask's draft:
the same key with another draft (a resumed coordination that somehow decomposed anew) is
refused (`idempotency_key_reused`), never silently bound to the old child.

Made with no `run_id`, these keys last the clients' window (`IdempotencySettings.
retention_s`): the dispatcher must keep them while its coordination runs, or also find a
subtask's child by its parent and index, before a coordination may resume later than that.
"""

from __future__ import annotations

from app.engine.idempotent_create import CreateKey
from app.schemas.coordination import SubtaskDraft
from app.store.idempotency import request_hash

SUBTASK_SCOPE = "tasks.coordinate"
SUBTASK_RUN_SCOPE = "runs.coordinate"


def subtask_key(coordination_id: str, index: int) -> str:
    """Subtask `index`'s key within its scope; ids are Names (at most 200 characters), so
    the key stays within the 255 of a client's `Idempotency-Key`."""
    return f"{coordination_id}:{index}"


def subtask_create_key(coordination_id: str, index: int, draft: SubtaskDraft) -> CreateKey:
    """The key the child task of subtask `index` is created under."""
    return CreateKey(SUBTASK_SCOPE, subtask_key(coordination_id, index), _draft_hash(draft))


def subtask_run_key(coordination_id: str, index: int, draft: SubtaskDraft) -> CreateKey:
    """The key the run working subtask `index` is created under."""
    return CreateKey(SUBTASK_RUN_SCOPE, subtask_key(coordination_id, index), _draft_hash(draft))


def _draft_hash(draft: SubtaskDraft) -> str:
    return request_hash(draft.model_dump(mode="json"))
