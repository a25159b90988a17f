"""`execution_loop: auto` as a table: complexity, monthly budget spent and hybrid fallback
→ the kind a run uses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.core.config import AutoLoopSettings, Settings
from app.core.vocabulary import Complexity, ExecutionLoopKind
from app.runs.loop.kinds.auto import AutoLoopPolicy, select_loop

C, K = Complexity, ExecutionLoopKind
PLAIN = AutoLoopPolicy()
FALLBACK = AutoLoopPolicy(hybrid_fallback=K.PLAN_EXECUTE)
TO_REACT = AutoLoopPolicy(hybrid_fallback=K.REACT)

TABLE = [
    # complexity, spent %, policy, kind
    (None, None, PLAIN, K.REACT),
    (None, 95.0, PLAIN, K.REACT),
    (C.SIMPLE, None, PLAIN, K.REACT),
    (C.SIMPLE, 99.0, PLAIN, K.REACT),
    (C.MEDIUM, None, PLAIN, K.PLAN_EXECUTE),
    (C.MEDIUM, 99.0, PLAIN, K.PLAN_EXECUTE),
    (C.COMPLEX, None, PLAIN, K.HYBRID),
    (C.COMPLEX, 79.9, PLAIN, K.HYBRID),
    (C.COMPLEX, 80.0, PLAIN, K.PLAN_EXECUTE),  # at the threshold: downgraded
    (C.EPIC, None, PLAIN, K.HYBRID),
    (C.EPIC, 100.0, PLAIN, K.PLAN_EXECUTE),
    (C.COMPLEX, None, FALLBACK, K.PLAN_EXECUTE),
    (C.EPIC, None, TO_REACT, K.REACT),
    (C.EPIC, 85.0, TO_REACT, K.PLAN_EXECUTE),  # the downgrade comes first
    (C.MEDIUM, None, TO_REACT, K.PLAN_EXECUTE),  # the fallback is for hybrid only
    (C.SIMPLE, None, AutoLoopPolicy(budget_tight_at_percent=50), K.REACT),
    (C.COMPLEX, 50.0, AutoLoopPolicy(budget_tight_at_percent=50), K.PLAN_EXECUTE),
]


@pytest.mark.parametrize(("complexity", "spent", "policy", "kind"), TABLE)
def test_auto_chooses(
    complexity: Complexity | None,
    spent: float | None,
    policy: AutoLoopPolicy,
    kind: ExecutionLoopKind,
) -> None:
    assert select_loop(complexity, spent, policy).kind is kind


def test_a_complexity_without_a_rule_takes_the_default() -> None:
    policy = AutoLoopPolicy(rules={C.SIMPLE: K.REACT}, default=K.PLAN_EXECUTE)
    chosen = select_loop(C.EPIC, None, policy)
    assert chosen.kind is K.PLAN_EXECUTE and "no rule for epic" in chosen.reason


def test_the_reason_tells_each_layer_that_applied() -> None:
    chosen = select_loop(C.EPIC, 92.5, FALLBACK)
    assert chosen.reason == "epic → hybrid; a monthly budget is 92.5 % spent → plan_execute"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"default": K.AUTO}, "auto cannot choose auto"),
        ({"hybrid_fallback": K.AUTO}, "auto cannot choose auto"),
        ({"rules": {C.SIMPLE: K.AUTO}}, "auto cannot choose auto"),
        ({"budget_tight_at_percent": 0}, "budget_tight_at_percent"),
        ({"budget_tight_at_percent": 101}, "budget_tight_at_percent"),
    ],
)
def test_a_policy_that_cannot_choose_is_refused(fields: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        AutoLoopPolicy(**fields)  # type: ignore[arg-type]


def test_an_operator_sets_the_threshold_and_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWRIGHT_AUTO_LOOP__BUDGET_TIGHT_AT_PERCENT", "50")
    monkeypatch.setenv("LOOPWRIGHT_AUTO_LOOP__HYBRID_FALLBACK", "react")
    policy = AutoLoopPolicy.from_settings(Settings().auto_loop)
    assert (policy.budget_tight_at_percent, policy.hybrid_fallback) == (50, K.REACT)
    assert AutoLoopPolicy.from_settings(AutoLoopSettings()) == AutoLoopPolicy()
    with pytest.raises(ValidationError, match="hybrid_fallback cannot be auto"):
        AutoLoopSettings(hybrid_fallback=K.AUTO)
