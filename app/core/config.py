"""Settings: one pydantic-settings model with nested groups, read from `LOOPWRIGHT_*`.

Nothing here runs at import time; `load_settings()` reads the environment when called.
Nested groups use `__` in variable names: `LOOPWRIGHT_TASK_ENGINE__QUEUE_SIZE=500`.
"""

from __future__ import annotations

import ipaddress
import os
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.addresses import parse_networks
from app.core.model_config import ModelConfig
from app.core.vocabulary import ExecutionLoopKind, ModelTier, ReviewTimeoutPolicy


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "loopwright" / "pgdata"


class ServerSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Interface the HTTP server binds.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port; 0 picks a free one.")
    max_body_bytes: int = Field(
        1_048_576, ge=1024, le=64 * 1_048_576, description="Largest request body accepted."
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        max_length=50,
        description=(
            "Without API keys, Host names answered besides loopback ones (e.g. a container's "
            "name); with keys every Host is answered."
        ),
    )


class DatabaseSettings(BaseModel):
    url: str | None = Field(
        None,
        description="Postgres URL. Unset: an embedded server is started in `embedded_data_dir`.",
    )
    embedded_data_dir: Path = Field(
        default_factory=_default_data_dir, description="Data directory of the embedded server."
    )
    pool_size: int = Field(10, ge=1, le=200, description="Connections kept in the pool.")
    pool_timeout_s: float = Field(
        5.0, gt=0, le=120, description="Wait for a pooled connection before failing."
    )
    migrate_on_start: bool = Field(True, description="Apply Alembic migrations at start-up.")


class TaskEngineSettings(BaseModel):
    queue_size: int = Field(1000, ge=1, le=1_000_000, description="Bounded mutation queue.")
    max_batch: int = Field(
        128, ge=1, le=10_000, description="Mutations committed together (group commit)."
    )
    drain_timeout_s: float = Field(
        10.0, ge=0, le=600, description="How long stop() lets queued mutations finish."
    )
    queue_full_retry_after_s: int = Field(
        1, ge=1, le=60, description="Retry-After sent with a 503 queue_full."
    )


class StreamSettings(BaseModel):
    keepalive_s: float = Field(
        15.0, gt=0, le=300, description="Interval of SSE keep-alive comments."
    )
    poll_interval_s: float = Field(
        5.0,
        gt=0,
        le=300,
        description="A stream re-reads its table this often even without a wake-up.",
    )
    replay_batch: int = Field(
        500,
        ge=1,
        le=10_000,
        description="Events read per query; a stream holds at most this many in memory.",
    )
    send_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3_600,
        description="A subscriber that takes longer than this to accept one write is dropped.",
    )
    max_subscribers: int = Field(
        1_000, ge=1, le=1_000_000, description="Open streams per process; past it: 503."
    )
    full_retry_after_s: int = Field(
        5, ge=1, le=3_600, description="Retry-After sent with a 503 too_many_streams."
    )
    settled_linger_s: float = Field(
        1.0,
        ge=0,
        le=60,
        description="A run's stream ends this long after the event that settled the run.",
    )


class WorkerSettings(BaseModel):
    enabled: bool = Field(True, description="Run agent loops in this process (`serve`).")
    capacity: int = Field(8, ge=1, le=10_000, description="Runs executed at once.")
    lease_ttl_s: float = Field(
        30.0, ge=1, le=3_600, description="A claimed run's lease; renewed every third of it."
    )
    poll_interval_s: float = Field(
        2.0, gt=0, le=300, description="Look for work this often even without a wake-up."
    )
    grace_s: float = Field(
        10.0, ge=0, le=3_600, description="At shutdown, how long running loops may finish."
    )
    retry_base_delay_s: float = Field(
        15.0, ge=0, le=86_400, description="A failed run's retry waits base * factor^n s."
    )
    retry_factor: float = Field(2.0, ge=1, le=10, description="Backoff factor of run retries.")
    max_retries: int = Field(
        5, ge=0, le=100, description="Retries of a failed run before it is dead-lettered."
    )


class ReconcilerSettings(BaseModel):
    interval_s: float = Field(
        300.0, gt=0, le=86_400, description="Also runs at start-up; then this often."
    )
    auto_resume: bool = Field(
        True, description="Requeue timed-out runs whose last checkpoint is resumable."
    )
    max_resume_attempts: int = Field(
        2,
        ge=0,
        le=100,
        description=(
            "Automatic resumes of one run (over its life) before the reconciler leaves it "
            "timed out for a person; 0: never resume automatically."
        ),
    )
    cancel_timeout_s: float = Field(
        180.0, ge=0, le=86_400, description="A waiting run's cancel request older than this wins."
    )


class ApprovalSettings(BaseModel):
    """Review gates and gated tool calls (a workflow's own review timeout wins for reviews)."""

    sweep_interval_s: float = Field(
        30.0, gt=0, le=86_400, description="How often expired approvals are looked for."
    )
    review_timeout_s: int = Field(
        86_400, ge=60, le=30 * 86_400, description="How long a task review waits for a person."
    )
    review_timeout_policy: ReviewTimeoutPolicy = Field(
        ReviewTimeoutPolicy.ESCALATE, description="What an unanswered task review becomes."
    )
    tool_timeout_s: int = Field(
        86_400, ge=60, le=30 * 86_400, description="How long a gated tool call waits."
    )
    tool_timeout_policy: ReviewTimeoutPolicy = Field(
        ReviewTimeoutPolicy.ESCALATE, description="What an unanswered tool approval becomes."
    )

    @model_validator(mode="after")
    def _no_side_effect_by_timer(self) -> ApprovalSettings:
        if self.tool_timeout_policy is ReviewTimeoutPolicy.AUTO_APPROVE:
            raise ValueError("tool_timeout_policy cannot be auto_approve: a timer never consents")
        return self


class IdempotencySettings(BaseModel):
    """How long an `Idempotency-Key` is remembered (Stripe-like): within the window a
    repeated request replays the first response; after it the key is forgotten and the
    request is new. Keys a run's tool call makes (`spawn_child_runs`, `create_task`) are
    kept while that run may still run again, whatever the window."""

    retention_s: int = Field(
        86_400,
        ge=60,
        le=365 * 86_400,
        description="A key is remembered this long after its first request.",
    )
    sweep_interval_s: float = Field(
        3_600.0,
        gt=0,
        le=86_400,
        description="How often expired keys are deleted (lookups ignore them at once).",
    )

    @property
    def retention(self) -> timedelta:
        return timedelta(seconds=self.retention_s)


class TriggerSettings(BaseModel):
    """Triggers: how inbound webhook deliveries are authenticated, and how often schedules
    and chains are looked at."""

    signature_tolerance_s: int = Field(
        300,
        ge=1,
        le=86_400,
        description="A webhook signature's timestamp may differ from the server's clock by "
        "at most this much, either way; an accepted signature is refused if it comes again "
        "while it could still pass this check.",
    )

    scheduler_interval_s: float = Field(
        1.0,
        gt=0,
        lt=60,  # under a fire's grace period, or an on-time fire could be missed
        description="How often the scheduler looks for schedules that are due.",
    )
    chain_relay_interval_s: float = Field(
        1.0, gt=0, le=60, description="How often settled runs and executions fire chains."
    )
    fire_retention_s: int | None = Field(
        30 * 86_400,
        ge=3_600,
        description="Fires are deleted from the fire log this long after they were made "
        "(a webhook delivery id repeated later fires anew); null keeps them.",
    )

    @property
    def signature_memory(self) -> timedelta:
        """How long an accepted signature is remembered: its timestamp may be up to the
        tolerance ahead of the clock when it is accepted, and stays valid for the tolerance
        after that timestamp."""
        return timedelta(seconds=2 * self.signature_tolerance_s)


class WorkspaceSettings(BaseModel):
    """Workspaces (`workspaces/engine/`): where task worktrees live, and how git runs."""

    worktrees_dir: Path | None = Field(
        None,
        description="Where task worktrees are made, one directory a project. Unset: inside "
        "each repository's git directory (`.git/loopwright-worktrees/`), out of its "
        "checkout's sight.",
    )
    max_git_processes: int = Field(
        4, ge=1, le=64, description="git processes at once, across all workspaces."
    )
    git_timeout_s: float = Field(120.0, gt=0, le=3_600, description="A git command's limit.")
    merge_interval_s: float = Field(
        5.0,
        gt=0,
        le=3_600,
        description="How often the merge queue looks for work besides the boards' wake-ups "
        "(another process's approvals and tasks).",
    )


class SprintSettings(BaseModel):
    """The sprint clock (`sprints/engine/sprint_clock.py`): it also wakes at each clocked sprint's
    end, so the interval bounds how late it sees a sprint activated or switched on."""

    clock_interval_s: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="How often the sprint clock looks for active sprints whose end date "
        "passed, besides waking at the next one's end.",
    )


class HistorySettings(BaseModel):
    """Retention of runs' history (their steps: transcript, checkpoints, events). Off by
    default: kept forever. With a window, the history of a conversation whose runs all
    settled for good longer ago than the window is deleted, run rows aside (the rule is in
    `runs/engine/history_retention.py`)."""

    retention_s: int | None = Field(
        None,
        ge=3_600,  # at least an hour, so a typo in seconds cannot wipe what was just settled
        le=100 * 365 * 86_400,
        description=(
            "Prune a conversation's history this long after the last of its runs settled; "
            "unset: keep it forever."
        ),
    )
    prune_interval_s: float = Field(
        3_600.0, gt=0, le=86_400, description="How often settled history is looked for."
    )
    prune_chunk: int = Field(
        100,
        ge=1,
        le=10_000,
        description="Conversations pruned per transaction (each with all its steps).",
    )

    @property
    def retention(self) -> timedelta | None:
        return None if self.retention_s is None else timedelta(seconds=self.retention_s)


class LLMSettings(BaseModel):
    """One group per model provider that needs settings (`LOOPWRIGHT_LLM__<PROVIDER>__…`),
    kept as given: each group's shape is its provider's (`app/llm/providers/<name>/
    settings.py`), which the core may not import. The providers' registry reads and checks
    every group when the process builds its providers, and refuses a group no provider owns
    (a setting of a provider that does not exist, or one left over from an older layout)
    instead of ignoring it."""

    model_config = ConfigDict(extra="allow")

    def group(self, provider: str) -> object:
        """The provider's group as given (a mapping, or its settings object); {}: none."""
        return (self.model_extra or {}).get(provider, {})


_USD_PER_MTOK = Field(ge=0, le=10_000, description="USD per million tokens.")


class PriceSetting(BaseModel):
    """A model's price; cache prices unset: 1.25 times the input (writes), a tenth of it
    (reads), Anthropic's rule."""

    model_config = ConfigDict(extra="forbid")

    input: Decimal = _USD_PER_MTOK
    output: Decimal = _USD_PER_MTOK
    cache_write: Decimal | None = Field(None, ge=0, le=10_000)
    cache_read: Decimal | None = Field(None, ge=0, le=10_000)
    tier: ModelTier | None = Field(None, description="The model's tier, if it is in one.")


class CostSettings(BaseModel):
    prices: dict[str, PriceSetting] = Field(
        default_factory=dict,
        max_length=1_000,
        description=(
            "Prices by `provider/model` (JSON), added to the shipped ones or replacing them: "
            'e.g. `{"anthropic/claude-sonnet-4-5": {"input": 3, "output": 15}}`. A model '
            "with no price has a cost of null."
        ),
    )

    tier_models: dict[str, dict[ModelTier, str]] = Field(
        default_factory=dict,
        description=(
            "Per provider, the model of each tier a downgraded run moves to (Anthropic's are "
            'shipped): e.g. `{"anthropic": {"medium": "claude-sonnet-4-5"}}`.'
        ),
    )
    downgrade_at_percent: float | None = Field(
        80,
        gt=0,
        le=100,
        description=(
            "A run of a large-tier model starts on the next tier's model while a monthly "
            "budget it counts against has spent this percent of its limit; null: never."
        ),
    )

    @model_validator(mode="after")
    def _keys_name_provider_and_model(self) -> CostSettings:
        for key in self.prices:
            provider, _, model = key.partition("/")
            if not provider or not model:
                raise ValueError(f"price key {key!r} is not `provider/model`")
        return self


class RoutingSettings(BaseModel):
    auction_scorer: ModelConfig | None = Field(
        None,
        description=(
            "A model that scores every bidder of an `auction` in one call (JSON like an "
            "agent's `model`); unset, bids are capability scores."
        ),
    )
    auction_max_usd: float = Field(
        0.05,
        gt=0,
        le=100,
        description="The most one auction's scoring call may cost (its worst case); dearer: "
        "capability scores.",
    )


class ResilienceSettings(BaseModel):
    """How hard one LLM call tries (attempts, backoff, the server's `retry-after`, the
    fallback model after overloads, persistent mode for unattended runs) and the circuit
    breakers of tools and models."""

    llm_max_attempts: int = Field(
        4, ge=1, le=100, description="Attempts at one LLM call (persistent mode: unlimited)."
    )
    llm_max_delay_s: float = Field(
        32.0, ge=0, le=3_600, description="Longest backoff between LLM attempts (before jitter)."
    )
    llm_retry_after_cap_s: float = Field(
        60.0, ge=0, le=86_400, description="Longest server `retry-after` honoured."
    )
    llm_overloads_before_fallback: int = Field(
        3, ge=1, le=100, description="Consecutive overloads (529) before the fallback model."
    )
    llm_persistent_cap_s: float = Field(
        21_600.0, gt=0, le=7 * 86_400, description="Persistent retry mode gives up after this."
    )
    llm_persistent_chunk_s: float = Field(
        30.0, gt=0, le=3_600, description="Persistent mode sleeps in chunks, heartbeating."
    )
    breaker_window_calls: int = Field(
        20, ge=1, le=10_000, description="Recent calls a circuit breaker judges."
    )
    breaker_min_calls: int = Field(
        5, ge=1, le=10_000, description="Calls in the window before a breaker may open."
    )
    breaker_failure_rate: float = Field(
        0.5, gt=0, le=1, description="Failure share of the window that opens a breaker."
    )
    breaker_cooldown_s: float = Field(
        30.0, ge=0, le=86_400, description="An open breaker refuses calls this long."
    )

    @model_validator(mode="after")
    def _window_holds_min_calls(self) -> ResilienceSettings:
        if self.breaker_min_calls > self.breaker_window_calls:
            raise ValueError("breaker_min_calls must not exceed breaker_window_calls")
        return self


class ToolSettings(BaseModel):
    http_allow_private: bool = Field(
        False, description="Let http_request reach private, loopback and link-local addresses."
    )
    http_allowed_networks: list[str] = Field(
        default_factory=list, description="CIDRs http_request may reach even if private."
    )
    http_idempotency_key_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Hosts (`name` or `name:port`) that honour http_request's Idempotency-Key: its "
            "POST/PUT/PATCH/DELETE calls to them are retried and re-sent on resume."
        ),
    )
    plugins: list[str] = Field(
        default_factory=list,
        description="`module:function` entries; each function returns a list of extra tools.",
    )


class McpSettings(BaseModel):
    """Agents' MCP tool servers (`mcp_servers`): what a worker lets them run and reach.
    Closed by default: no command may be run and only public addresses reached until the
    operator opens what it trusts."""

    stdio_commands: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Commands an agent's stdio server may run (its `command`, exactly); "
        '["*"]: any. Whoever may write agents may run these on the workers.',
    )
    allow_private: bool = Field(
        False, description="Let MCP server URLs reach private, loopback and link-local addresses."
    )
    allowed_networks: list[str] = Field(
        default_factory=list, description="CIDRs MCP server URLs may reach even if private."
    )
    secret_env: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Environment variables of the worker that agents' MCP `env` and `headers` "
        "may reference as `${NAME}` (the secrets stay out of the agents).",
    )
    start_timeout_s: float = Field(
        30.0, gt=0, le=600, description="Starting a server, its handshake and its tool list."
    )

    @model_validator(mode="after")
    def _check(self) -> McpSettings:
        parse_networks(self.allowed_networks)
        return self


class WebhookSettings(BaseModel):
    """Outbound webhooks (`/v1/webhooks`): how deliveries are sent, retried and bounded,
    and which addresses their URLs may reach (the `http_request` tool's policy, set apart)."""

    enabled: bool = Field(
        True, description="Send deliveries from this process (`serve` and `worker`)."
    )
    max_attempts: int = Field(
        5, ge=1, le=100, description="Attempts at one delivery before it is dead-lettered."
    )
    backoff_base_s: float = Field(
        15.0, ge=0, le=86_400, description="A failed attempt's retry waits base * factor^(n-1) s."
    )
    backoff_factor: float = Field(2.0, ge=1, le=10, description="Backoff factor of retries.")
    timeout_s: float = Field(
        10.0, gt=0, le=300, description="One attempt (connect, send, read the answer)."
    )
    lease_s: float = Field(
        60.0,
        gt=0,
        le=3_600,
        description="A deliverer holds a delivery this long per attempt; a process killed "
        "mid-attempt leaves it to another after that. Longer than `timeout_s`.",
    )
    concurrency: int = Field(4, ge=1, le=256, description="Deliveries sent at once.")
    retention_s: int | None = Field(
        30 * 86_400,
        ge=3_600,
        description="Settled deliveries (and their attempts) are deleted this long after "
        "they were made; null keeps them.",
    )
    response_excerpt_chars: int = Field(
        1_000, ge=0, le=65_536, description="How much of a receiver's answer the log keeps."
    )
    poll_interval_s: float = Field(
        10.0, gt=0, le=3_600, description="Look for due deliveries this often without a wake-up."
    )
    allow_private: bool = Field(
        False, description="Let webhook URLs reach private, loopback and link-local addresses."
    )
    allowed_networks: list[str] = Field(
        default_factory=list, description="CIDRs webhook URLs may reach even if private."
    )

    @model_validator(mode="after")
    def _check(self) -> WebhookSettings:
        if self.lease_s <= self.timeout_s:
            raise ValueError("lease_s must be longer than timeout_s")
        parse_networks(self.allowed_networks)
        return self


class CompactionSettings(BaseModel):
    """Auto-compaction and the recovery ladder: when a prompt grows past the threshold,
    older messages are folded into a summary, then pruned deeper, then a human is asked."""

    threshold_ratio: float = Field(
        0.7, gt=0, lt=1, description="Compact past this share of the model's context window."
    )
    keep_last_messages: int = Field(
        10, ge=2, le=200, description="Messages a compaction (R1) keeps verbatim."
    )
    deep_prune_keep_messages: int = Field(
        4, ge=1, le=200, description="Messages a deep prune (R2) keeps verbatim."
    )
    pin_max_chars: int = Field(
        2_000, ge=100, le=100_000, description="Longest tool result pinned into a summary."
    )
    summary_model: str = Field(
        "claude-haiku-4-5",
        min_length=1,
        description="The cheap model that writes summaries (an `openai` agent's own model "
        "writes its summaries: its server may know no other).",
    )
    summary_max_tokens: int = Field(
        1_024, ge=64, le=32_000, description="Longest summary the model may write."
    )
    summary_timeout_s: float = Field(
        60.0, gt=0, le=600, description="A summary call slower than this counts as failed."
    )
    summary_failures_before_truncation_only: int = Field(
        3, ge=1, le=100, description="Consecutive failed summaries before a run only truncates."
    )
    max_recovery_actions: int = Field(
        4, ge=0, le=100, description="Compactions, prunes and asks allowed in one run."
    )
    escalation_window_iterations: int = Field(
        20, ge=1, le=10_000, description="Over budget again this soon after a stage: escalate."
    )

    @model_validator(mode="after")
    def _prune_keeps_less(self) -> CompactionSettings:
        if self.deep_prune_keep_messages >= self.keep_last_messages:
            raise ValueError("deep_prune_keep_messages must be below keep_last_messages")
        return self


class LoopGuardSettings(BaseModel):
    """The stagnation detector (a run that keeps repeating its tool calls, or cycling
    through them, is stuck) and the "too many errors" terminator; tool-loop detection has
    fixed thresholds of its own, not set here."""

    stagnation_enabled: bool = Field(True, description="Stop runs stuck repeating tool calls.")
    stagnation_window_size: int = Field(
        5, ge=1, le=100, description="Recent tool-bearing turns the detector judges."
    )
    stagnation_repetition_threshold: float = Field(
        0.6, gt=0, le=1, description="Share of repeated calls in the window that means stuck."
    )
    stagnation_cycle_detection: bool = Field(
        True, description="Also treat turns going round in a cycle (A→B→A→B) as stuck."
    )
    stagnation_max_corrections: int = Field(
        1, ge=0, le=10, description="Corrective notes before a stuck run stops (0: at once)."
    )
    stagnation_min_tool_turns: int = Field(
        2, ge=1, le=100, description="Tool-bearing turns before the detector gives a verdict."
    )
    max_consecutive_error_batches: int = Field(
        3,
        ge=0,
        le=1_000,
        description=(
            "Tool batches in a row in which every call failed before the run fails as "
            "`too_many_errors`; calls a person refused are not counted; 0: never."
        ),
    )

    @model_validator(mode="after")
    def _window_holds_min_turns(self) -> LoopGuardSettings:
        if self.stagnation_min_tool_turns > self.stagnation_window_size:
            raise ValueError("stagnation_min_tool_turns must not exceed stagnation_window_size")
        return self


class AutoLoopSettings(BaseModel):
    """How `execution_loop: auto` moves a run off hybrid (app/runs/loop/kinds/auto.py); which
    kind each task complexity calls for is fixed."""

    budget_tight_at_percent: float = Field(
        80,
        gt=0,
        le=100,
        description="From this percent of a monthly budget spent, a run `auto` would give "
        "`hybrid` runs `plan_execute`.",
    )
    hybrid_fallback: ExecutionLoopKind | None = Field(
        None,
        description="The kind `auto` gives the runs it would give `hybrid` (not `auto`); "
        "null: hybrid.",
    )

    @model_validator(mode="after")
    def _falls_back_to_a_kind(self) -> AutoLoopSettings:
        if self.hybrid_fallback is ExecutionLoopKind.AUTO:
            raise ValueError("hybrid_fallback cannot be auto")
        return self


class AuthSettings(BaseModel):
    api_keys: list[SecretStr] = Field(
        default_factory=list,
        description="Bearer API keys. With none, the server only binds loopback.",
    )
    public_docs: bool = Field(
        False,
        description="Serve /openapi.json, /docs and /redoc without a key when keys are set.",
    )
    session_secret: SecretStr | None = Field(
        None,
        min_length=32,
        description=(
            "Signs the dashboard's session cookies (HMAC-SHA256). Unset: a random one made "
            "at each start, so sessions end at a restart and are not shared between "
            "processes; set the same one on every process behind one address."
        ),
    )
    session_ttl_s: int = Field(
        43_200, ge=60, le=30 * 86_400, description="How long a dashboard login lasts."
    )


class Settings(BaseSettings):
    """Every knob of a Loopwright process."""

    model_config = SettingsConfigDict(
        env_prefix="LOOPWRIGHT_", env_nested_delimiter="__", extra="ignore"
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    task_engine: TaskEngineSettings = Field(default_factory=TaskEngineSettings)
    streams: StreamSettings = Field(default_factory=StreamSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    reconciler: ReconcilerSettings = Field(default_factory=ReconcilerSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    triggers: TriggerSettings = Field(default_factory=TriggerSettings)
    sprints: SprintSettings = Field(default_factory=SprintSettings)
    workspaces: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    costs: CostSettings = Field(default_factory=CostSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    resilience: ResilienceSettings = Field(default_factory=ResilienceSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    loop_guards: LoopGuardSettings = Field(default_factory=LoopGuardSettings)
    auto_loop: AutoLoopSettings = Field(default_factory=AutoLoopSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Root log level."
    )
    log_format: Literal["auto", "json", "text"] = Field(
        "auto", description="Structured or plain logs; `auto`: plain on a terminal, else JSON."
    )

    @model_validator(mode="after")
    def _refuse_open_bind_without_keys(self) -> Settings:
        if not self.auth.api_keys and not is_loopback(self.server.host):
            raise ValueError(
                f"refusing to listen on {self.server.host!r} without API keys: "
                "set LOOPWRIGHT_AUTH__API_KEYS or bind 127.0.0.1"
            )
        return self


def is_loopback(host: str) -> bool:
    """`localhost`, a name under `.localhost` (RFC 6761), or a loopback address."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment; the conventional `DATABASE_URL` is honoured too."""
    settings = Settings(**overrides)  # type: ignore[arg-type]
    if settings.database.url is None and os.environ.get("DATABASE_URL"):
        database = settings.database.model_copy(update={"url": os.environ["DATABASE_URL"]})
        settings = settings.model_copy(update={"database": database})
    return settings
