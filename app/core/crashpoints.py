"""Named points where a test can make the process die as if killed (SIGKILL), to prove what
a crash there leaves behind. Off unless `LOOPWRIGHT_CRASH_AT` names the point; read at the
call, so it costs one dictionary lookup on the hot path."""

from __future__ import annotations

import os
import signal

POINTS = frozenset(
    {
        "after_claim",
        "after_llm_response",
        "during_tool",
        "after_tool_result",
        "before_final",
        # A coordination's phases: after each one's work, before it is recorded.
        "coordination_decomposed",
        "coordination_routed",
        "coordination_dispatched",
        "coordination_synthesis_created",
        "coordination_parent_updated",
        # A workspace merge's steps (app/workspaces/repo/merge.py), each after the journal
        # records it: before the rebase, a rebase stopped on a conflict and not yet
        # aborted, rebased, about to move the base branch, and the base branch moved.
        "merge_rebasing",
        "merge_rebase_stopped",
        "merge_rebased",
        "merge_publishing",
        "merge_published",
    }
)


def crash_point(name: str) -> None:
    if os.environ.get("LOOPWRIGHT_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
