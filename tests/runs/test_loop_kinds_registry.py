"""The loop kinds' registry covers every declared kind but `auto`: a name the API and the
database accept is always one a worker can drive."""

from __future__ import annotations

import pytest

from app.core.vocabulary import ExecutionLoopKind
from app.runs.loop.kinds.react import ReAct
from app.runs.loop.kinds.registry import LOOP_KINDS, LoopKinds

K = ExecutionLoopKind


def test_the_built_in_registry_has_a_loop_for_every_declared_kind_but_auto() -> None:
    assert set(LOOP_KINDS.loops) == set(K) - {K.AUTO}
    for kind in LOOP_KINDS.loops:
        assert callable(getattr(LOOP_KINDS.loop_of(kind), "drive", None)), kind


def test_a_registry_missing_a_declared_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="no loop for the declared kind\\(s\\) hybrid"):
        LoopKinds({K.REACT: ReAct, K.PLAN_EXECUTE: ReAct})


def test_auto_has_no_loop_of_its_own() -> None:
    with pytest.raises(ValueError, match="auto is resolved"):
        LoopKinds({**LOOP_KINDS.loops, K.AUTO: ReAct})
    with pytest.raises(ValueError, match="auto is resolved"):
        LOOP_KINDS.loop_of(K.AUTO)
