"""Prometheus metrics of one process: counters fed by the events it commits, gauges read at
scrape time.

Counters count what happened in this process (sum them across processes); the run gauges
come from the database, so every process reports the same cluster-wide numbers (take one,
or `max`, not the sum). Each app instance owns its registry, so apps in one interpreter
(tests) never share a count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from app.core.states import RUN_SETTLED, RunStatus
from app.runs.schemas.runs import RunRead

BREAKER_STATES = ("closed", "open", "half_open")

# Outcomes of webhook delivery attempts: the receiver answered 2xx; an attempt failed and a
# retry follows; the last attempt failed.
WEBHOOK_OUTCOMES = ("succeeded", "failed", "dead_lettered")
WEBHOOK_LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

# From under a second (a free lane) to a day (a lane held by a run waiting on a person).
LANE_WAIT_BUCKETS_S = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class Metrics:
    """The process's metrics. The loop hands over each committed boundary's events
    (`observe_run_events`) and its LLM calls (`llm_call`); the scrape sets the run counts
    (`set_run_counts`) and reads the rest through the callables given here."""

    def __init__(
        self,
        *,
        task_queue_depth: Callable[[], int] = lambda: 0,
        breaker_states: Callable[[], Mapping[str, str]] = dict,
        open_streams: Callable[[], int] = lambda: 0,
        component_restarts: Callable[[], Mapping[str, int]] = dict,
    ) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)
        self._runs_and_streams(registry, task_queue_depth, open_streams)
        self._llm(registry)
        self._loop(registry)
        self._triggers_and_webhooks(registry)
        self._work(registry)
        registry.register(_BreakerStates(breaker_states))
        registry.register(_ComponentRestarts(component_restarts))
        # Event type -> the counter it increments and the payload fields naming its labels.
        self._counted: dict[str, tuple[Counter, tuple[str, ...]]] = {
            "agent.llm.retry": (self.llm_retries, ("class",)),
            "agent.llm.fallback": (self.llm_fallbacks, ("reason",)),
            "agent.tool.retry": (self.tool_retries, ("tool",)),
            "agent.mcp.server_failed": (self.mcp_server_failures, ("stage",)),
            "agent.loop.detected": (self.loop_detections, ("tier", "level")),
            "agent.stagnation.detected": (self.stagnations, ("action",)),
            "agent.compaction.run": (self.compactions, ()),
            "agent.recovery.fired": (self.recovery_actions, ("stage",)),
            "agent_run.retry_scheduled": (self.run_retries, ()),
        }

    def _runs_and_streams(
        self,
        registry: CollectorRegistry,
        task_queue_depth: Callable[[], int],
        open_streams: Callable[[], int],
    ) -> None:
        """Runs, their queue and lanes, the event streams and the history's fence and pruning."""
        self.runs = Gauge(
            "loopwright_runs",
            "Runs by status, in the database (all processes).",
            ["status"],
            registry=registry,
        )
        self.queue_depth = Gauge(
            "loopwright_queue_depth",
            "Work waiting: queued runs (database) and this process's TaskEngine queue.",
            ["queue"],
            registry=registry,
        )
        self.queue_depth.labels("task_engine").set_function(task_queue_depth)
        self.open_streams = Gauge(
            "loopwright_open_streams",
            "SSE streams open in this process (past the cap, new ones are refused with 503).",
            registry=registry,
        )
        self.open_streams.set_function(open_streams)
        self.streams_refused = Counter(
            "loopwright_streams_refused",
            "SSE stream requests refused with 503 `too_many_streams` (the process was full).",
            registry=registry,
        )
        self.streams_dropped = Counter(
            "loopwright_streams_dropped",
            "SSE clients dropped because they accepted nothing for the send timeout.",
            registry=registry,
        )
        self.stale_appends = Counter(
            "loopwright_stale_history_appends",
            "Steps a worker tried to append after its lease was taken over: the fence wrote "
            "nothing, and the worker let the run go.",
            registry=registry,
        )
        self.history_steps_pruned = Counter(
            "loopwright_history_steps_pruned",
            "Steps of settled runs' history deleted by history retention (off by default).",
            registry=registry,
        )
        self.history_conversations_pruned = Counter(
            "loopwright_history_conversations_pruned",
            "Conversations pruned by history retention (all their runs' steps deleted).",
            registry=registry,
        )
        self.run_outcomes = Counter(
            "loopwright_run_outcomes",
            "Runs that settled in this process, by the status they settled in.",
            ["status"],
            registry=registry,
        )
        for status in RUN_SETTLED:
            self.run_outcomes.labels(status.value)  # present at 0 from the first scrape
        self.run_retries = Counter(
            "loopwright_run_retries",
            "Failed runs sent back to their lane for another attempt.",
            registry=registry,
        )
        self.lane_wait = Histogram(
            "loopwright_lane_wait_seconds",
            "Time from a run's creation to its first start (lane and worker wait).",
            buckets=LANE_WAIT_BUCKETS_S,
            registry=registry,
        )

    def _llm(self, registry: CollectorRegistry) -> None:
        """LLM calls: outcomes, tokens, cost, retries and fallbacks."""
        self.llm_calls = Counter(
            "loopwright_llm_calls",
            "LLM calls (each with its retries) by model and outcome: `ok` or a failure class.",
            ["model", "outcome"],
            registry=registry,
        )
        self.llm_tokens = Counter(
            "loopwright_llm_tokens",
            "Tokens of LLM calls by provider, model and kind: input, output, cache_write, "
            "cache_read (interrupted calls: what was billed).",
            ["provider", "model", "kind"],
            registry=registry,
        )
        self.llm_cost = Counter(
            "loopwright_llm_cost_usd",
            "USD of priced LLM calls by provider and model (`GET /v1/costs` has the totals).",
            ["provider", "model"],
            registry=registry,
        )
        self.llm_unpriced_calls = Counter(
            "loopwright_llm_unpriced_calls",
            "LLM calls of a model with no price, by provider and model.",
            ["provider", "model"],
            registry=registry,
        )
        self.llm_retries = Counter(
            "loopwright_llm_retries",
            "LLM call retries by failure class.",
            ["class"],
            registry=registry,
        )
        self.llm_fallbacks = Counter(
            "loopwright_llm_fallbacks",
            "Switches to an agent's fallback model, by reason.",
            ["reason"],
            registry=registry,
        )

    def _loop(self, registry: CollectorRegistry) -> None:
        """Inside the loop: tool retries, MCP servers, loop and stagnation detection,
        compaction and recovery."""
        self.tool_retries = Counter(
            "loopwright_tool_retries",
            "Tool executions retried after a transient failure.",
            ["tool"],
            registry=registry,
        )
        self.mcp_server_failures = Counter(
            "loopwright_mcp_server_failures",
            "MCP servers of agents that failed, by stage: `start`, `call` (it went away), "
            "`timeout` (a call got no answer in time).",
            ["stage"],
            registry=registry,
        )
        self.loop_detections = Counter(
            "loopwright_loop_detections",
            "Tool-loop detections by tier and escalation level.",
            ["tier", "level"],
            registry=registry,
        )
        self.stagnations = Counter(
            "loopwright_stagnation_detections",
            "Runs found making no progress: corrected, or terminated.",
            ["action"],
            registry=registry,
        )
        self.compactions = Counter(
            "loopwright_compactions",
            "Auto-compactions of a run's context (R1).",
            registry=registry,
        )
        self.recovery_actions = Counter(
            "loopwright_recovery_actions",
            "Deeper recovery stages fired (R2 deep prune, R3 ask a human).",
            ["stage"],
            registry=registry,
        )

    def _triggers_and_webhooks(self, registry: CollectorRegistry) -> None:
        """Trigger fires, schedules' misfires and webhook deliveries."""
        self.trigger_fires = Counter(
            "loopwright_trigger_fires",
            "Trigger fires in this process, by the trigger's kind and the fire's status "
            "(`started`, `failed`: its target could not start, `skipped`: a policy said no).",
            ["kind", "status"],
            registry=registry,
        )
        self.schedule_misfires = Counter(
            "loopwright_schedule_misfires",
            "Fire times of schedules missed while no process was up, left out by their "
            "misfire policy.",
            registry=registry,
        )
        self.webhook_deliveries = Counter(
            "loopwright_webhook_deliveries",
            "Webhook delivery attempts made by this process, by outcome: `succeeded` (2xx), "
            "`failed` (a retry follows), `dead_lettered` (the last attempt failed).",
            ["outcome"],
            registry=registry,
        )
        for outcome in WEBHOOK_OUTCOMES:
            self.webhook_deliveries.labels(outcome)
        self.webhook_latency = Histogram(
            "loopwright_webhook_delivery_seconds",
            "How long webhook delivery attempts took, answered or not.",
            buckets=WEBHOOK_LATENCY_BUCKETS_S,
            registry=registry,
        )

    def _work(self, registry: CollectorRegistry) -> None:
        """Coordinations, the sprint clock and the merge queue."""
        self.coordination_phases = Histogram(
            "loopwright_coordination_phase_seconds",
            "How long coordinations' phases took in this process, by phase and outcome "
            "(`ok`, `failed`, `skipped`); dispatch counts from its last pass's start.",
            ["phase", "outcome"],
            registry=registry,
        )
        self.coordinations_settled = Counter(
            "loopwright_coordinations_settled",
            "Coordinations this process settled, by status (`completed`, `failed`, `cancelled`).",
            ["status"],
            registry=registry,
        )
        self.sprints_auto_transitioned = Counter(
            "loopwright_sprints_auto_transitioned",
            "Sprints this process's sprint clock moved from active to in_review (their "
            "`auto_transition` is on and their end date passed).",
            registry=registry,
        )
        self.merges = Counter(
            "loopwright_merges",
            "Worktree merges this process's merge queue attempted, by outcome (`merged`, "
            "`conflict`, `semantic_issues`, `failed`).",
            ["outcome"],
            registry=registry,
        )

    def observe_run_events(
        self, events: Iterable[tuple[str, Mapping[str, Any]]], run: RunRead
    ) -> None:
        """Count a committed boundary's events; `run` is the run as that boundary left it.
        Call it after the commit only: a rolled-back event did not happen."""
        kinds = set()
        for kind, data in events:
            kinds.add(kind)
            counted = self._counted.get(kind)
            if counted is not None:
                counter, fields = counted
                labels = [str(data.get(field, "unknown")) for field in fields]
                (counter.labels(*labels) if labels else counter).inc()
            elif kind == "agent_run.started" and not data.get("resumed"):
                self._observe_lane_wait(run)
        # A failure that is retried is not an outcome (the run is queued again), and a
        # dead-lettered run counts once, as dead_letter, not also as failed.
        if run.status in RUN_SETTLED and f"agent_run.{run.status.value}" in kinds:
            self.run_outcomes.labels(run.status.value).inc()

    def webhook_attempt(self, event_type: str, latency_s: float) -> None:
        """A delivery attempt's outcome was recorded, as the event it wrote says
        (`webhook.delivery.succeeded`, `.failed`, `.dead_lettered`)."""
        self.webhook_deliveries.labels(event_type.rsplit(".", 1)[-1]).inc()
        self.webhook_latency.observe(latency_s)

    def llm_call(self, model: str, outcome: str) -> None:
        """One LLM call ended, after any retries: `outcome` is `ok` or the class it failed
        with (`LLMCallFailed.error_class`)."""
        self.llm_calls.labels(model, outcome).inc()

    def llm_spend(
        self, provider: str, model: str, tokens: Mapping[str, int], cost_usd: float | None
    ) -> None:
        """What one LLM call used (`tokens` by kind) and cost (None: it has no price)."""
        for kind, count in tokens.items():
            if count:
                self.llm_tokens.labels(provider, model, kind).inc(count)
        if cost_usd is None:
            self.llm_unpriced_calls.labels(provider, model).inc()
        else:
            self.llm_cost.labels(provider, model).inc(cost_usd)

    def coordination_phase(self, phase: str, outcome: str, seconds: float) -> None:
        """A coordination's phase was recorded (after its commit)."""
        self.coordination_phases.labels(phase, outcome).observe(seconds)

    def coordination_settled(self, status: str) -> None:
        self.coordinations_settled.labels(status).inc()

    def merge_attempted(self, outcome: str) -> None:
        self.merges.labels(outcome).inc()

    def trigger_fired(self, kind: str, status: str) -> None:
        """A fire committed (a repeat of an occasion that fired already is not one)."""
        self.trigger_fires.labels(kind, status).inc()

    def set_run_counts(self, counts: Mapping[RunStatus, int]) -> None:
        """The runs per status as just read from the database (absent statuses are 0)."""
        for status in RunStatus:
            self.runs.labels(status.value).set(counts.get(status, 0))
        self.queue_depth.labels("runs").set(counts.get(RunStatus.QUEUED, 0))

    def _observe_lane_wait(self, run: RunRead) -> None:
        # A run's first start: `started_at` is set once, by its first claim.
        if run.started_at is not None:
            waited_s = (run.started_at - run.created_at).total_seconds()
            self.lane_wait.observe(max(0.0, waited_s))


class _BreakerStates(Collector):
    """One gauge per breaker and state, 1 for the state it is in (a Prometheus state set),
    read from the breakers' snapshot at scrape time."""

    def __init__(self, snapshot: Callable[[], Mapping[str, str]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "loopwright_circuit_breaker_state",
            "Circuit breakers: 1 for the state each one is in.",
            labels=["breaker", "state"],
        )
        for breaker, current in sorted(self._snapshot().items()):
            for state in BREAKER_STATES:
                family.add_metric([breaker, state], 1.0 if state == current else 0.0)
        yield family


class _ComponentRestarts(Collector):
    """`loopwright_component_restarts_total`: how often each supervised background
    component's loop died and was started again, read from the components at scrape time."""

    def __init__(self, restarts: Callable[[], Mapping[str, int]]) -> None:
        self._restarts = restarts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "loopwright_component_restarts",
            "Restarts of this process's background components whose loop died, by component.",
            labels=["component"],
        )
        for component, count in sorted(self._restarts().items()):
            family.add_metric([component], count)
        yield family
