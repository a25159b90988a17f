"""The metrics a process keeps: which committed events count where, when a run's outcome
counts, the lane wait, and what the scrape-time sources report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.core.states import RunStatus
from app.runs.schemas.runs import RunRead
from app.telemetry.metrics import Metrics

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def a_run(status: RunStatus = RunStatus.RUNNING, *, waited_s: float | None = 2.5) -> RunRead:
    started = None if waited_s is None else CREATED + timedelta(seconds=waited_s)
    return RunRead.model_validate(
        {
            "id": "run_1",
            "agent_id": "agt_1",
            "conversation_id": "cnv_1",
            "lane": "conversation:cnv_1",
            "input": "go",
            "multitask": "enqueue",
            "status": status,
            "iteration": 1,
            "usage": {},
            "result": None,
            "stop_reason": None,
            "error": None,
            "waiting_for": None,
            "attempt": 1,
            "not_before": None,
            "error_log": [],
            "parent_run_id": None,
            "metadata_": {},
            "cancel_requested": False,
            "cancel_requested_at": None,
            "heartbeat_at": None,
            "lease_owner": None,
            "lease_expires_at": None,
            "lease_token": 1,
            "resume_available": False,
            "system_prompt_hash": None,
            "version": 1,
            "created_at": CREATED,
            "updated_at": CREATED,
            "started_at": started,
            "finished_at": None,
        }
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("event", "labels", "counter"),
    [
        ("agent.llm.retry", {"class": "overloaded"}, "llm_retries"),
        ("agent.llm.fallback", {"reason": "breaker_open"}, "llm_fallbacks"),
        ("agent.tool.retry", {"tool": "search"}, "tool_retries"),
        ("agent.loop.detected", {"tier": "pattern", "level": "directive"}, "loop_detections"),
        ("agent.stagnation.detected", {"action": "correct"}, "stagnation_detections"),
        ("agent.compaction.run", {}, "compactions"),
        ("agent.recovery.fired", {"stage": "R2"}, "recovery_actions"),
        ("agent_run.retry_scheduled", {}, "run_retries"),
    ],
)
def test_each_event_counts_under_the_labels_its_payload_names(
    event: str, labels: dict[str, str], counter: str
) -> None:
    metrics = Metrics()
    name = f"loopwright_{counter}_total"
    # Payloads carry more (attempts, delays, token counts); only the label fields count.
    data = {**labels, "attempt": 2, "tokens_before": 9000}
    metrics.observe_run_events([(event, data)], a_run())
    assert sample(metrics, name, **labels) == 1
    metrics.observe_run_events([(event, data), (event, data)], a_run())
    assert sample(metrics, name, **labels) == 3


def test_a_payload_without_a_label_field_counts_as_unknown() -> None:
    metrics = Metrics()
    metrics.observe_run_events([("agent.recovery.fired", {})], a_run())
    assert sample(metrics, "loopwright_recovery_actions_total", stage="unknown") == 1


@pytest.mark.parametrize(
    ("events", "status", "outcome"),
    [
        (["agent_run.completed"], RunStatus.COMPLETED, "completed"),
        (["agent_run.cancelled"], RunStatus.CANCELLED, "cancelled"),
        (["agent_run.timed_out"], RunStatus.TIMED_OUT, "timed_out"),
        (["agent_run.failed"], RunStatus.FAILED, "failed"),  # no retries configured
        (["agent_run.failed", "agent_run.dead_letter"], RunStatus.DEAD_LETTER, "dead_letter"),
        (["agent_run.failed", "agent_run.retry_scheduled"], RunStatus.QUEUED, None),
        (["agent_run.waiting_on_human"], RunStatus.WAITING_ON_HUMAN, None),
        (["message.created", "tool.started"], RunStatus.RUNNING, None),
        # A later event on a run that settled earlier is not a second outcome.
        (["agent.tool.retry"], RunStatus.COMPLETED, None),
    ],
)
def test_a_run_outcome_counts_once_under_the_status_it_settled_in(
    events: list[str], status: RunStatus, outcome: str | None
) -> None:
    metrics = Metrics()
    metrics.observe_run_events([(kind, {}) for kind in events], a_run(status))
    counted = {
        s.value: sample(metrics, "loopwright_run_outcomes_total", status=s.value)
        for s in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED,
                  RunStatus.TIMED_OUT, RunStatus.DEAD_LETTER)
    }  # fmt: skip
    assert counted == {s: 1.0 if s == outcome else 0.0 for s in counted}


def test_the_lane_wait_is_observed_at_a_runs_first_start_only() -> None:
    metrics = Metrics()
    started = {"attempt": 1, "resumed": False, "worker": "w"}
    metrics.observe_run_events([("agent_run.started", started)], a_run(waited_s=2.5))
    resumed = {"attempt": 2, "resumed": True, "worker": "w"}
    metrics.observe_run_events([("agent_run.started", resumed)], a_run(waited_s=2.5))
    assert sample(metrics, "loopwright_lane_wait_seconds_count") == 1
    assert sample(metrics, "loopwright_lane_wait_seconds_sum") == 2.5
    assert sample(metrics, "loopwright_lane_wait_seconds_bucket", le="1.0") == 0
    assert sample(metrics, "loopwright_lane_wait_seconds_bucket", le="5.0") == 1


def test_llm_calls_count_by_model_and_outcome() -> None:
    metrics = Metrics()
    metrics.llm_call("claude-a", "ok")
    metrics.llm_call("claude-a", "ok")
    metrics.llm_call("claude-a", "overloaded")
    name = "loopwright_llm_calls_total"
    assert sample(metrics, name, model="claude-a", outcome="ok") == 2
    assert sample(metrics, name, model="claude-a", outcome="overloaded") == 1


def test_run_counts_cover_every_status_and_give_the_run_queue_depth() -> None:
    metrics = Metrics(task_queue_depth=lambda: 7)
    metrics.set_run_counts({RunStatus.QUEUED: 3, RunStatus.COMPLETED: 5})
    metrics.set_run_counts({RunStatus.QUEUED: 2, RunStatus.RUNNING: 1})  # a later scrape
    counts = {s.value: sample(metrics, "loopwright_runs", status=s.value) for s in RunStatus}
    assert counts == {s.value: 0.0 for s in RunStatus} | {"queued": 2.0, "running": 1.0}
    assert sample(metrics, "loopwright_queue_depth", queue="runs") == 2
    assert sample(metrics, "loopwright_queue_depth", queue="task_engine") == 7


def test_breakers_report_the_state_they_are_in_at_scrape_time() -> None:
    states = {"provider:anthropic": "open"}
    metrics = Metrics(breaker_states=lambda: states)
    name = "loopwright_circuit_breaker_state"
    assert sample(metrics, name, breaker="provider:anthropic", state="open") == 1
    assert sample(metrics, name, breaker="provider:anthropic", state="closed") == 0
    states["provider:anthropic"] = "half_open"
    states["tool:http_request"] = "closed"
    assert sample(metrics, name, breaker="provider:anthropic", state="half_open") == 1
    assert sample(metrics, name, breaker="provider:anthropic", state="open") == 0
    assert sample(metrics, name, breaker="tool:http_request", state="closed") == 1


def test_two_apps_in_one_process_never_share_a_count() -> None:
    first, second = Metrics(), Metrics()
    first.observe_run_events([("agent.compaction.run", {})], a_run())
    assert sample(first, "loopwright_compactions_total") == 1
    assert sample(second, "loopwright_compactions_total") == 0
