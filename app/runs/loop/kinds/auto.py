"""`execution_loop: auto`: the kind a run uses, chosen from its task's estimated complexity
and how much of its tightest monthly budget is spent, in three layers:

    1. rules           complexity → kind (simple → react, medium → plan_execute,
                       complex and epic → hybrid); no task, or no rule: the default (react)
    2. budget downgrade hybrid → plan_execute once a monthly budget is ≥ 80 % spent
    3. hybrid fallback  hybrid → the fallback, when one is set

A pure function of its inputs; the loop records what it chose on the run, so a resumed
run keeps its kind whatever the budget did meanwhile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.core.config import AutoLoopSettings
from app.core.vocabulary import Complexity, ExecutionLoopKind

Kind = ExecutionLoopKind

DEFAULT_RULES: Mapping[Complexity, Kind] = MappingProxyType(
    {
        Complexity.SIMPLE: Kind.REACT,
        Complexity.MEDIUM: Kind.PLAN_EXECUTE,
        Complexity.COMPLEX: Kind.HYBRID,
        Complexity.EPIC: Kind.HYBRID,
    }
)


@dataclass(frozen=True)
class AutoLoopPolicy:
    """How `auto` chooses. No kind it names may be `auto` itself."""

    rules: Mapping[Complexity, Kind] = field(default_factory=lambda: DEFAULT_RULES)
    default: Kind = Kind.REACT  # no task, or a complexity no rule names
    budget_tight_at_percent: float = 80.0  # hybrid → plan_execute from here on
    hybrid_fallback: Kind | None = None  # None: hybrid runs as chosen

    def __post_init__(self) -> None:
        named = [*self.rules.values(), self.default, self.hybrid_fallback]
        if Kind.AUTO in named:
            raise ValueError("auto cannot choose auto")
        if not 0 < self.budget_tight_at_percent <= 100:
            raise ValueError("budget_tight_at_percent must be in (0, 100]")

    @classmethod
    def from_settings(cls, settings: AutoLoopSettings) -> AutoLoopPolicy:
        return cls(
            budget_tight_at_percent=settings.budget_tight_at_percent,
            hybrid_fallback=settings.hybrid_fallback,
        )


@dataclass(frozen=True)
class Selection:
    """The kind chosen, and why (for the run's record and its readers)."""

    kind: Kind
    reason: str


def select_loop(
    complexity: Complexity | None, spent_percent: float | None, policy: AutoLoopPolicy
) -> Selection:
    """`spent_percent`: of the tightest monthly budget the run counts against (None: no
    such budget)."""
    if complexity is None:
        return Selection(policy.default, "no task complexity: the default")
    kind = policy.rules.get(complexity)
    if kind is None:
        return Selection(policy.default, f"no rule for {complexity.value}: the default")
    reason = f"{complexity.value} → {kind.value}"
    tight = spent_percent is not None and spent_percent >= policy.budget_tight_at_percent
    if kind is Kind.HYBRID and tight:
        kind = Kind.PLAN_EXECUTE
        reason += f"; a monthly budget is {spent_percent:g} % spent → {kind.value}"
    if kind is Kind.HYBRID and policy.hybrid_fallback is not None:
        kind = policy.hybrid_fallback
        reason += f"; hybrid falls back → {kind.value}"
    return Selection(kind, reason)
