"""The error streak (what the "too many errors" terminator counts) as the watchers keep it:
tool batches in, the count and the last errors out, and who wins when the loop ladder and
stagnation judge the same batch."""

from __future__ import annotations

from itertools import count
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import create_async_engine

from app.core.config import LoopGuardSettings, load_settings
from app.core.messages import ToolUseBlock
from app.db.connection import make_sessionmaker
from app.events.engine.bus import EventBus
from app.llm.providers.registry import Providers
from app.runs.engine.leases import LeaseTerm
from app.runs.engine.runs import RunCommands
from app.runs.loop.boundary import write_boundaries
from app.runs.loop.run_loop import RunLoop
from app.runs.loop.stagnation import StagnationPolicy
from app.runs.loop.watchers import ErrorStreak, Watchers
from app.runtime.group_commit import GroupCommitter
from app.wiring import build_tools, build_workers

_ids = count()
ERROR = ("Error: the widget is out of stock", True)
OK = ("3 widgets", False)
TERMINATES_AT_ONCE = StagnationPolicy(max_corrections=0)


def call(name: str = "broken", **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{next(_ids)}", name=name, input=arguments)


def batch(
    watchers: Watchers,
    results: list[tuple[str, bool]],
    *,
    calls: list[ToolUseBlock] | None = None,
    declined: frozenset[int] = frozenset(),
    policy: StagnationPolicy | None = None,
    limit: int = 3,
) -> Watchers:
    """`watchers` once a batch of one call per result (or `calls`) is counted."""
    calls = calls or [call(sku=next(_ids)) for _ in results]
    verdict = watchers.after_batch(
        calls,
        {c.id: r for c, r in zip(calls, results, strict=False)},
        policy or StagnationPolicy(),
        declined={calls[i].id for i in declined},
        max_error_batches=limit,
    )
    return verdict.watchers


def test_batches_whose_every_call_failed_count_and_any_success_starts_over() -> None:
    watchers = Watchers()
    watchers = batch(watchers, [ERROR])
    watchers = batch(watchers, [ERROR, ERROR])
    assert watchers.errors.batches == 2
    watchers = batch(watchers, [ERROR, OK])  # one success is enough
    assert watchers.errors == ErrorStreak()
    watchers = batch(watchers, [ERROR])
    assert (watchers.errors.batches, watchers.errors.reached(3)) == (1, False)


def test_a_call_without_a_result_is_an_error() -> None:
    calls = [call(sku=1), call(sku=2)]
    policy = StagnationPolicy()
    verdict = Watchers().after_batch(calls, {calls[0].id: OK}, policy, max_error_batches=3)
    assert verdict.watchers.errors.batches == 0
    verdict = Watchers().after_batch(calls, {calls[0].id: ERROR}, policy, max_error_batches=3)
    assert verdict.watchers.errors.batches == 1


def test_calls_a_person_refused_count_neither_way() -> None:
    watchers = batch(batch(Watchers(), [ERROR]), [ERROR])
    # A refusal beside a failure: the failure alone judges the batch.
    watchers = batch(watchers, [ERROR, ERROR], declined=frozenset({1}))
    assert watchers.errors.batches == 3
    watchers = batch(Watchers(errors=ErrorStreak(2)), [ERROR], declined=frozenset({0}))
    assert watchers.errors == ErrorStreak(2)  # only a refusal: nothing to judge


def test_the_stop_names_the_last_batchs_errors_clipped() -> None:
    long = ("Error: " + "x" * 1_000, True)
    streak = ErrorStreak().after([long, ERROR, ERROR, ERROR])
    assert len(streak.last_errors) == 3
    assert len(streak.last_errors[0]) == 300
    assert streak.message.startswith("1 tool batches in a row failed in every call; the last: ")
    assert streak.message.endswith(f"; {ERROR[0]}; {ERROR[0]}")


def test_zero_turns_the_terminator_off() -> None:
    assert not ErrorStreak(1_000).reached(0)
    assert ErrorStreak(3).reached(3) and ErrorStreak(4).reached(3)
    assert not ErrorStreak(2).reached(3)


def test_the_streak_rides_in_the_checkpoint_counters() -> None:
    watchers = batch(batch(Watchers(), [ERROR]), [ERROR])
    loaded = Watchers.load(watchers.counters)
    assert loaded.errors == watchers.errors == ErrorStreak(2, (ERROR[0],))
    # A checkpoint written before the streak existed: a fresh one.
    old = {k: v for k, v in watchers.counters.items() if k != "error_streak"}
    assert Watchers.load(old).errors == ErrorStreak()


def test_the_terminator_takes_a_batch_the_loop_ladder_and_stagnation_also_judge() -> None:
    same = [call(sku="W-1") for _ in range(3)]
    at_limit = Watchers()
    for c in same[:2]:
        at_limit = batch(at_limit, [ERROR], calls=[c], policy=TERMINATES_AT_ONCE)
    # Without the terminator, the third identical call gets a nudge and stops the run as
    # stagnant (no corrections allowed).
    alone = at_limit.after_batch(
        [same[2]], {same[2].id: ERROR}, TERMINATES_AT_ONCE, max_error_batches=0
    )
    assert alone.stop is not None and alone.stop.action == "terminate"
    assert alone.notes and [kind for kind, _ in alone.events] == [
        "agent.loop.detected",
        "agent.stagnation.detected",
    ]
    # With it, the batch is the terminator's alone: no note, no event, no stop verdict,
    # and the other watchers' states as they were.
    verdict = at_limit.after_batch(
        [same[2]], {same[2].id: ERROR}, TERMINATES_AT_ONCE, max_error_batches=3
    )
    assert (verdict.notes, verdict.events, verdict.stop) == ([], [], None)
    assert verdict.watchers.errors.reached(3)
    assert verdict.watchers.loops == at_limit.loops
    assert verdict.watchers.stagnation == at_limit.stagnation


def test_the_setting_reads_the_environment_and_reaches_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert LoopGuardSettings().max_consecutive_error_batches == 3  # the documented default
    monkeypatch.setenv("LOOPWRIGHT_LOOP_GUARDS__MAX_CONSECUTIVE_ERROR_BATCHES", "5")
    settings = load_settings()
    assert settings.loop_guards.max_consecutive_error_batches == 5
    with pytest.raises(ValidationError):
        LoopGuardSettings(max_consecutive_error_batches=-1)

    # `build_workers` hands it to every loop (nothing here connects to a database).
    sessionmaker = make_sessionmaker(create_async_engine("postgresql+asyncpg://nobody@/none"))
    bus = EventBus()
    pool = build_workers(
        settings,
        sessionmaker,
        bus,
        RunCommands(sessionmaker, bus),
        Providers(settings.llm),
        GroupCommitter(sessionmaker, write_boundaries),
        build_tools(settings, sessionmaker, []),
    )
    term = LeaseTerm(30.0, sent_at=0.0)
    loop = cast(RunLoop, pool._loops(SimpleNamespace(lease_token=1), "w", term))  # type: ignore[arg-type]
    assert loop.deps.max_error_batches == 5
