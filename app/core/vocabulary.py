"""Closed vocabularies: each enum's values are the database text."""

from __future__ import annotations

from enum import StrEnum


class TaskType(StrEnum):
    DEVELOPMENT = "development"
    DESIGN = "design"
    RESEARCH = "research"
    REVIEW = "review"
    MEETING = "meeting"
    ADMIN = "admin"


class Priority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Complexity(StrEnum):
    SIMPLE = "simple"
    MEDIUM = "medium"
    COMPLEX = "complex"
    EPIC = "epic"


class TaskStructure(StrEnum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"
    MIXED = "mixed"


class CoordinationTopology(StrEnum):
    AUTO = "auto"
    SAS = "sas"  # single agent system
    CENTRALIZED = "centralized"
    DECENTRALIZED = "decentralized"
    CONTEXT_DEPENDENT = "context_dependent"


class CoordinationPhase(StrEnum):
    """The phases of a task's coordination (`POST /v1/tasks/{id}/coordinate`), in the
    order they run; a coordination resumed after a crash starts again at its phase."""

    DECOMPOSE = "decompose"  # the parent task becomes a DAG of subtasks (given or by an LLM)
    ROUTE = "route"  # each subtask finds its agent by the routing strategies
    TOPOLOGY = "topology"  # the topology requested (or `auto`) becomes a concrete one
    VALIDATE = "validate"  # the plan may run: at least one subtask is routable
    DISPATCH = "dispatch"  # the subtasks run, wave after wave of the DAG
    ROLL_UP = "roll_up"  # the subtasks' statuses become the parent's outcome
    UPDATE_PARENT = "update_parent"  # the parent task moves to that outcome


class CoordinationRunPurpose(StrEnum):
    """Why a coordination made a run beside its subtasks' own."""

    PEER = "peer"  # a decentralized peer revising its result in a debate round
    SYNTHESIS = "synthesis"  # the orchestrator joining the subtasks' results


class PhaseOutcome(StrEnum):
    """How one phase of a coordination ended."""

    OK = "ok"
    FAILED = "failed"  # a failed decompose, route or validate ends the coordination
    SKIPPED = "skipped"  # nothing to do (a decomposition the client gave needs no LLM)


class BoardColumn(StrEnum):
    """A project's Kanban board: each column is one task status (`app.core.states`)."""

    BACKLOG = "backlog"  # created
    READY = "ready"  # assigned
    IN_PROGRESS = "in_progress"  # in_progress
    REVIEW = "review"  # in_review
    DONE = "done"  # completed


class WipMode(StrEnum):
    """What a column's WIP limit does to a move that would pass it."""

    STRICT = "strict"  # refused: 409 `wip_limit_reached`
    ADVISORY = "advisory"  # accepted, with a `task.wip_limit_exceeded` event


class Ceremony(StrEnum):
    """A sprint ceremony a trigger's run facilitates, and the sprint it is about."""

    PLANNING = "planning"  # the project's newest sprint being planned
    REVIEW = "review"  # its active sprint, else the one in review
    RETROSPECTIVE = "retrospective"  # its sprint in review, else in retrospective


class WorkflowKind(StrEnum):
    """The four workflow types: how a definition's tasks are worked."""

    SEQUENTIAL = "sequential"  # one step after another
    PARALLEL = "parallel"  # branches at once, under `max_parallel_tasks`
    KANBAN = "kanban"  # tasks pulled across the project's board under WIP limits
    AGILE_KANBAN = "agile_kanban"  # the board, time-boxed in sprints


class MergeOrder(StrEnum):
    """In which order a workspace merges its approved worktrees into the base branch."""

    COMPLETION = "completion"  # as their tasks were approved
    PRIORITY = "priority"  # the most urgent task first, then by approval
    MANUAL = "manual"  # when a person asks (`POST /v1/worktrees/{id}/merge`)


class ConflictEscalation(StrEnum):
    """Who resolves a merge that conflicts (textually, or by the semantic checks)."""

    PERSON = "person"  # an approval: fix the branch and approve to merge, or reject
    AGENT = "agent"  # the workspace's review agent is given the conflict in a run


MAX_WORKTREES = 8  # a workspace's worktrees at once


class MergeOutcome(StrEnum):
    MERGED = "merged"  # the base branch has it
    CONFLICT = "conflict"  # the rebase on the base branch conflicted: nothing moved
    SEMANTIC_ISSUES = "semantic_issues"  # merged cleanly, but the checks found issues: held
    FAILED = "failed"  # git refused for another reason (`detail`)


class SemanticCheck(StrEnum):
    """The semantic conflict checks run on a clean textual merge's Python files."""

    MISSING_REFERENCE = "missing_reference"  # a name used that no longer exists
    BROKEN_CALL = "broken_call"  # a call that no longer fits its function's signature
    DUPLICATE_DEFINITION = "duplicate_definition"  # one top-level name defined twice
    CONFLICTING_IMPORT = "conflicting_import"  # one name imported from two places
    SYNTAX_ERROR = "syntax_error"  # a merged file Python cannot parse


class WorktreeStatus(StrEnum):
    """A task's worktree, from its creation to its merge (or its end without one)."""

    ACTIVE = "active"  # its task's runs work in it
    QUEUED = "queued"  # its task was approved: it waits its turn to merge
    MERGING = "merging"  # being rebased, checked and merged
    CONFLICT = "conflict"  # the rebase conflicted: escalated
    HELD = "held"  # the semantic checks found issues: a person accepts or rejects
    MERGED = "merged"  # on the base branch
    REJECTED = "rejected"  # a person turned its merge down
    ABANDONED = "abandoned"  # its task ended without approval (failed, cancelled)


class VariableType(StrEnum):
    """The type of a workflow template's variable (`/v1/workflow-templates`)."""

    INT = "int"  # a whole number between the variable's `minimum` and `maximum`
    STRING = "string"  # text, its length between `minimum` and `maximum`


class NodeType(StrEnum):
    START = "start"  # the single entry point
    END = "end"  # the single exit point
    TASK = "task"  # becomes one task at activation
    AGENT_ASSIGNMENT = "agent_assignment"  # names who gets the tasks downstream of it
    CONDITIONAL = "conditional"  # takes its true or its false edge, on the runtime context
    PARALLEL_SPLIT = "parallel_split"  # fans out to 2+ branches that run side by side
    PARALLEL_JOIN = "parallel_join"  # fans in: waits for all branches, or for any one


class EdgeType(StrEnum):
    SEQUENTIAL = "sequential"  # plain flow
    CONDITIONAL_TRUE = "conditional_true"  # taken when the source's condition holds
    CONDITIONAL_FALSE = "conditional_false"  # taken when it does not
    PARALLEL_BRANCH = "parallel_branch"  # one branch out of a parallel split


class JoinStrategy(StrEnum):
    ALL = "all"  # the join passes when every live branch is done
    ANY = "any"  # the join passes when one branch is done


class ReviewTimeoutPolicy(StrEnum):
    AUTO_APPROVE = "auto_approve"  # an unanswered review approves the task
    AUTO_DENY = "auto_deny"  # an unanswered review rejects it
    ESCALATE = "escalate"  # an unanswered review goes to someone else


class ApprovalKind(StrEnum):
    TASK_REVIEW = "task_review"  # a task reached `in_review`: its reviewer decides
    TOOL_CALL = "tool_call"  # a run wants to call a tool that needs a person's consent
    MERGE = "merge"  # a task's worktree would not merge cleanly: a person decides


class CostTier(StrEnum):
    """How much an agent costs to run: the `cost_optimised` routing strategy breaks price
    ties with it, and the `auction` matches it to a task's `estimated_complexity`."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class AssignmentStrategy(StrEnum):
    """How a task finds its agent (`POST /v1/tasks/{id}/route`, a task's `routing`, a
    workflow's agent assignment). Every strategy but `manual` considers only agents with
    room: fewer held tasks than their `max_concurrent_tasks`."""

    MANUAL = "manual"  # the agent named (or the task's `assigned_to`)
    ROLE_BASED = "role_based"  # an agent of the role with the skills; the least busy
    LOAD_BALANCED = "load_balanced"  # the capable agent holding the fewest tasks
    AUCTION = "auction"  # each capable agent bids a score; the highest wins
    HIERARCHICAL = "hierarchical"  # the manager, then down its reports (`reports_to`)
    COST_OPTIMISED = "cost_optimised"  # the capable agent whose model is cheapest


class Multitask(StrEnum):
    """What a new run does when its lane is busy."""

    ENQUEUE = "enqueue"  # wait in line behind the lane's runs
    REJECT = "reject"  # refuse it: 409 `lane_busy`
    INTERRUPT = "interrupt"  # cancel what holds or waits on the lane, then take it


class HumanAction(StrEnum):
    """What a person's answer to a waiting run does."""

    ANSWER = "answer"  # the answer becomes the waiting call's result
    RETRY_CALL = "retry_call"  # run the side-effecting call cut short by a crash again


# A context summary (what a person decides from) is at most this long.
SUMMARY_MAX_CHARS = 1_000


class StepKind(StrEnum):
    """What one step of a run's history records. Every kind but `note` is a resume point:
    the latest such step is the run's checkpoint."""

    INPUT = "input"  # a user message the run starts (or summarises) from
    LLM_RESPONSE = "llm_response"  # the model's answer, and the start of its tool calls
    TOOL_RESULT = "tool_result"  # the results of a tool batch, with the watchers' verdict
    COMPACTION = "compaction"  # the live context replaced by a shorter one
    JOURNAL_UPDATE = "journal_update"  # the run journal changed by a tool
    HUMAN_PAUSE = "human_pause"  # the run waits on a person
    FINAL = "final"  # the run settled
    NOTE = "note"  # events only (a retry, a claim, a command's change): not a resume point


RESUME_POINTS = frozenset(StepKind) - {StepKind.NOTE}


# The built-in kinds' names, as the API publishes them. Each kind is a module registered in
# `triggers/engine/kinds/`; one registered from elsewhere has a name not listed here.
class TriggerKind(StrEnum):
    """What fires a trigger."""

    WEBHOOK = "webhook"  # a signed request to `POST /v1/hooks/{trigger_id}`
    SCHEDULE = "schedule"  # a cron expression in a time zone, or a fixed interval
    CHAIN = "chain"  # a run settling, or a workflow execution finishing


class TargetKind(StrEnum):
    """What a trigger starts when it fires."""

    RUN = "run"  # a run of an agent (through the normal create path)
    WORKFLOW = "workflow"  # an execution of a workflow definition


class MisfirePolicy(StrEnum):
    """What a schedule does with the fire times it missed while no process was up."""

    SKIP = "skip"  # none of them: the next fire is the next one due from now
    RUN_ONCE = "run_once"  # one fire, for the latest missed time
    RUN_ALL = "run_all"  # each missed time, up to the schedule's catch-up bound


class OverlapPolicy(StrEnum):
    """What a schedule's fire does while the run its previous fire started is active (the
    lane's multitask policies)."""

    SKIP = "skip"  # no run for this fire; the fire is recorded as skipped
    ENQUEUE = "enqueue"  # the new run waits behind it on its lane
    INTERRUPT = "interrupt"  # the active run is cancelled and the new one takes the lane


class FireStatus(StrEnum):
    """What became of one fire of a trigger."""

    STARTED = "started"  # its run or execution was created
    SKIPPED = "skipped"  # its overlap or misfire policy said no
    FAILED = "failed"  # its target could not be started (the error says why)


class WebhookEventType(StrEnum):
    """The events a webhook (`/v1/webhooks`) may subscribe to. Each is delivered once per
    subscription, from the outbox the database writes in the event's own transaction
    (migration 0012's trigger lists these types). A run's events are taken from its lane's
    stream, which carries their details (`error`, `question`, `stop_reason`)."""

    RUN_COMPLETED = "agent_run.completed"
    RUN_FAILED = "agent_run.failed"  # an attempt failed; a retry or a dead letter may follow
    RUN_DEAD_LETTER = "agent_run.dead_letter"  # its retries ran out
    RUN_WAITING_ON_HUMAN = "agent_run.waiting_on_human"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_APPROVED = "approval.approved"
    APPROVAL_REJECTED = "approval.rejected"
    APPROVAL_EXPIRED = "approval.expired"  # its timeout policy decided
    EXECUTION_COMPLETED = "workflow.execution.completed"
    EXECUTION_FAILED = "workflow.execution.failed"
    EXECUTION_CANCELLED = "workflow.execution.cancelled"
    TRIGGER_FIRED = "trigger.fired"


class BudgetScope(StrEnum):
    """Whose LLM spending a budget bounds."""

    AGENT = "agent"  # one agent's runs
    PROJECT = "project"  # the runs of a project's tasks


class BudgetPeriod(StrEnum):
    """The window a budget's limit applies to, in UTC: it starts afresh each period."""

    DAY = "day"
    MONTH = "month"


class ModelTier(StrEnum):
    """How capable (and dear) a model is, within its provider: the price table groups models
    in tiers, a budget-aware downgrade moves a run one tier down, and the system prompt's
    profile follows the tier."""

    LARGE = "large"
    MEDIUM = "medium"
    SMALL = "small"


class ExecutionLoopKind(StrEnum):
    REACT = "react"  # reason, call tools, see the results, until a text answer
    PLAN_EXECUTE = "plan_execute"  # a planner's structured plan, its steps run in order
    HYBRID = "hybrid"  # a plan whose steps may themselves replan and branch
    AUTO = "auto"  # one of the above, chosen per run by the task's estimated complexity
