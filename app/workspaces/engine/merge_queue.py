"""The merge queue, a component of `serve`: each workspace's approved work reaches its
base branch one task at a time, in the workspace's order.

Every pass derives its work from the rows, so a crash anywhere is picked up by the next:

    worktree active, task in review      its changes committed, its diff recorded
    worktree active, task completed      → queued (its turn comes by the merge order)
    worktree active, task cancelled/gone → abandoned (its work committed on its branch,
                                         which stays; its directory removed)
    queued, its turn                     → merging: rebase on the base branch, the semantic
                                         checks, then the base moved by compare-and-set
        clean                            → merged (directory removed if the workspace says)
        textual conflict                 → conflict: the branch laid again on the base with
                                         the conflicts marked, and escalated: a person's
                                         approval (kind `merge`), or a run of the review
                                         agent on lane `worktree:<id>` in that worktree
        semantic issues                  → held: a person accepts (merged without the checks)
                                         or rejects
    conflict/held, its approval approved → queued again (a conflict: once resolved); rejected
                                         → rejected; the agent's run settled → queued again
                                         (after two attempts a person is asked instead)

A merge cut short leaves `merging`: at start-up each repository is recovered (its merge
lock's journal: a rebase left half done is aborted) and such worktrees are queued again;
the base branch moves only by compare-and-set, so it holds the merge or not, never half.
Recovery also removes the directories of settled worktrees whose removal was cut short.
A workspace whose repository is away at start-up is recovered by the first pass that
reaches it, and merges nothing until then; the others do not wait for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals import store as approval_store
from app.approvals.engine.approvals import ApprovalCommands
from app.core.states import RUN_SETTLED, ApprovalDecision, ApprovalStatus, TaskStatus
from app.core.streams import APPROVALS_STREAM, RUNS_STREAM, TASK_STREAM, WORKSPACES_CHANGED
from app.core.vocabulary import (
    ConflictEscalation,
    MergeOutcome,
    Multitask,
    WorktreeStatus,
)
from app.db.idempotency import request_hash
from app.events.engine.bus import EventBus
from app.runs.engine.runs import RunCommands
from app.runs.schemas.runs import RunCreate
from app.runs.store import runs as run_store
from app.runtime.components import Loop, Wakes
from app.tasks.store import tasks as task_store
from app.telemetry.metrics import Metrics
from app.workspaces import store
from app.workspaces.engine import changes
from app.workspaces.engine.escalation_texts import conflict_brief, question, summary
from app.workspaces.engine.semantic_review import SemanticReview
from app.workspaces.engine.worktrees import Opened, Worktrees
from app.workspaces.repo import merge
from app.workspaces.repo.conflicts import ConflictFile
from app.workspaces.repo.errors import WorkspaceError
from app.workspaces.repo.recovery import recover
from app.workspaces.repo.resolution import marked_files, restage_on_base
from app.workspaces.schemas import ConflictFile as ConflictFileRead
from app.workspaces.schemas import MergeResult, WorkspaceRead, WorktreeRead

log = logging.getLogger(__name__)

W = WorktreeStatus
MAX_AGENT_ATTEMPTS = 2  # review agent runs for one merge before a person is asked
# The task statuses after which a worktree's work will never be approved.
_ENDED = frozenset({TaskStatus.CANCELLED})
Freed = Callable[[str], Awaitable[None]]


class MergeQueue:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        bus: EventBus,
        worktrees: Worktrees,
        approvals: ApprovalCommands,
        runs: RunCommands,
        *,
        interval_s: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        semantic: SemanticReview | None = None,
        on_freed: Freed | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._worktrees = worktrees
        self._approvals = approvals
        self._runs = runs
        self._clock = clock
        self._semantic = semantic or SemanticReview()
        self._on_freed = on_freed
        self._metrics = metrics
        # Recovers interrupted merges first; then a pass at each change of the tasks,
        # approvals, runs and workspaces, else every `interval_s`.
        self.loop = Loop(
            "merge-queue",
            self.run_pass,
            Wakes(interval_s, (TASK_STREAM, APPROVALS_STREAM, RUNS_STREAM, WORKSPACES_CHANGED)),
            bus=bus,
            start_up=self._recover_at_start,
            clock=clock,
        )
        # Workspaces whose recovery is still due, once listed: one whose repository was
        # away at start-up must not keep what a stopped process left until a restart.
        self._listed = False
        self._unrecovered: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        self.loop.start()

    async def stop(self) -> None:
        await self.loop.stop()

    async def _recover_at_start(self) -> None:
        try:
            await self.recover()
        except Exception:  # the database is away: the first pass that reaches it recovers
            log.exception("merge queue: recovery at start-up failed")

    async def recover(self) -> None:
        """What a process that stopped left, repaired in each workspace: its repository's
        interrupted merge, worktrees left `merging` queued again (their merge is redone: a
        merge already on the base answers `already_merged`), and the directories of
        settled worktrees it had not removed yet. A workspace whose repository is away is
        recovered by the first pass that reaches it; until then it merges nothing, and
        the others go on."""
        async with self._sessionmaker() as session:
            workspaces = await store.all_workspaces(session)
        self._unrecovered = {w.project for w in workspaces}
        self._listed = True
        for workspace in workspaces:
            await self._recover(workspace)

    async def _recover(self, workspace: WorkspaceRead) -> None:
        try:
            await self._repair(workspace)
        except WorkspaceError as exc:
            log.warning("merge queue: %s: not recovered yet: %s", workspace.project, exc)
        else:
            self._unrecovered.discard(workspace.project)

    async def _repair(self, workspace: WorkspaceRead) -> None:
        repo = await self._worktrees.repos.open(workspace.repository)
        root = self._worktrees.repos.worktrees_root(repo, workspace.project)
        report = await recover(repo, managed_root=root)
        if report.interrupted is not None:
            log.warning("merge queue: %s: repaired an interrupted merge", workspace.project)
        async with self._sessionmaker() as session, session.begin():
            for worktree, _ in await store.unsettled(session, workspace.project):
                if worktree.status is W.MERGING:
                    await changes.update(session, self._clock(), worktree, status=W.QUEUED)
        async with self._sessionmaker() as session:
            settled = await store.settled_unremoved(session, (W.MERGED, W.ABANDONED, W.REJECTED))
        for worktree in settled:
            kept = worktree.status is W.MERGED and not workspace.cleanup_after_merge
            if worktree.project == workspace.project and not kept:
                await self._remove(Opened(worktree, workspace, repo))

    # -- passes ------------------------------------------------------------------------

    async def run_pass(self) -> None:
        if not self._listed:  # recovery at start-up did not reach the database
            await self.recover()
        async with self._sessionmaker() as session:
            workspaces = await store.all_workspaces(session)
        for workspace in workspaces:
            try:
                if workspace.project in self._unrecovered:
                    await self._recover(workspace)
                    if workspace.project in self._unrecovered:
                        continue  # its repository is still away
                await self._workspace_pass(workspace)
            except WorkspaceError as exc:  # its repository is away: the others go on
                log.warning("merge queue: %s: %s", workspace.project, exc)

    async def _workspace_pass(self, workspace: WorkspaceRead) -> None:
        repo = await self._worktrees.repos.open(workspace.repository)
        async with self._sessionmaker() as session:
            watched = await store.unsettled(session, workspace.project)
        for worktree, task_status in watched:
            opened = Opened(worktree, workspace, repo)
            if worktree.status is W.ACTIVE:
                await self._follow_task(opened, task_status)
            elif worktree.status in (W.CONFLICT, W.HELD):
                await self._settle_escalation(opened)
        # Turn after turn while the queue has work: a wake-up that came during a merge
        # (another approval) collapsed into one pass, which must not leave the rest
        # queued until the interval. Each merge moves its worktree out of `queued`
        # (merged, conflict, held) or ends the pass (the base moved under it: queued
        # again, for the next pass), so this ends.
        while True:
            async with self._sessionmaker() as session:
                merging = [w for w, _ in await store.unsettled(session, workspace.project)]
                if any(w.status is W.MERGING for w in merging):
                    return  # another process merges here now
                turn = await store.next_to_merge(session, workspace.project, workspace.merge_order)
            if turn is None:
                return
            done = await self.merge(Opened(turn, workspace, repo))
            if done is None or done.status is W.QUEUED:
                return  # another process took it, or it waits for the next pass

    async def _follow_task(self, opened: Opened, task_status: TaskStatus | None) -> None:
        worktree = opened.worktree
        if task_status is None or task_status in _ENDED:
            await self._end(opened, W.ABANDONED)
            return
        if task_status in (TaskStatus.IN_REVIEW, TaskStatus.COMPLETED):
            committed = await self._worktrees.commit(opened, await self._message(worktree))
            if committed is None:
                return  # changed meanwhile: the next pass
            worktree = committed
        if task_status is TaskStatus.COMPLETED:
            async with self._sessionmaker() as session, session.begin():
                await changes.update(
                    session, self._clock(), worktree, status=W.QUEUED, queued_at=self._clock()
                )

    async def _settle_escalation(self, opened: Opened) -> None:
        worktree = opened.worktree
        result = worktree.merge
        if worktree.approval_id is not None:
            async with self._sessionmaker() as session:
                approval = await approval_store.get_approval(session, worktree.approval_id)
            if approval is None or approval.status is ApprovalStatus.PENDING:
                return
            if approval.decision is ApprovalDecision.APPROVED:
                accepted = worktree.status is W.HELD
                await self._requeue(worktree, accepted_by=approval.decided_by if accepted else None)
            elif approval.decision is ApprovalDecision.REJECTED:
                await self._end(opened, W.REJECTED)
            else:  # withdrawn (cancelled): ask again
                await self._escalate(opened, result)
            return
        if result is not None and result.escalation_run_id is not None:
            async with self._sessionmaker() as session:
                run = await run_store.get_run(session, result.escalation_run_id)
            if run is None or run.status in RUN_SETTLED:
                await self._requeue(worktree)

    async def _requeue(self, worktree: WorktreeRead, *, accepted_by: str | None = None) -> None:
        merge_doc = (
            worktree.merge.model_copy(update={"accepted_by": accepted_by})
            if (worktree.merge is not None)
            else None
        )
        async with self._sessionmaker() as session, session.begin():
            await changes.update(
                session,
                self._clock(),
                worktree,
                status=W.QUEUED,
                approval_id=None,
                merge=merge_doc.model_dump(mode="json") if merge_doc else None,
                queued_at=worktree.queued_at or self._clock(),
            )

    # -- the merge ---------------------------------------------------------------------

    async def merge(self, opened: Opened) -> WorktreeRead | None:
        """Merge a queued worktree now (its turn, or a person's `POST …/merge`); None when
        another process took it first."""
        async with self._sessionmaker() as session, session.begin():
            claimed = await changes.update(
                session, self._clock(), opened.worktree, status=W.MERGING
            )
        if claimed is None:
            return None
        opened = Opened(claimed, opened.workspace, opened.repo)
        try:
            return await self._merge(opened)
        except WorkspaceError as exc:
            log.warning("merge of %s failed: %s", claimed.id, exc)
            return await self._escalate(opened, self._result(MergeOutcome.FAILED, detail=str(exc)))

    async def _merge(self, opened: Opened) -> WorktreeRead | None:
        worktree, workspace, repo = opened.worktree, opened.workspace, opened.repo
        committed = await self._worktrees.commit(opened, await self._message(worktree))
        worktree = committed or worktree
        opened = Opened(worktree, workspace, repo)
        marked = await marked_files(repo, workspace.base_branch, worktree.branch)
        if marked:
            detail = f"conflict markers remain in: {', '.join(marked)}"
            return await self._escalate(opened, self._result(MergeOutcome.CONFLICT, detail=detail))
        merger = merge.Merger(repo)
        ready = await merger.rebase(opened.root, worktree.branch, workspace.base_branch)
        if ready.status is merge.MergeStatus.ALREADY_MERGED:
            return await self._merged(opened, ready.base_after)
        if ready.status is merge.MergeStatus.CONFLICT:
            await restage_on_base(repo, opened.root, ready.head, workspace.base_branch)
            conflict = self._result(
                MergeOutcome.CONFLICT,
                conflicts=ready.conflicts,
                detail=f"the branch's work is laid on {workspace.base_branch} with the "
                "conflicts marked in its files: resolve them in the worktree",
            )
            return await self._escalate(opened, conflict)
        accepted = worktree.merge is not None and worktree.merge.accepted_by is not None
        if workspace.semantic_checks and not accepted:
            found = await self._semantic.review(
                repo, ready.base_before, ready.head, worktree.base_sha
            )
            if found.issues:
                held = self._result(
                    MergeOutcome.SEMANTIC_ISSUES, issues=found.issues, skipped=found.skipped
                )
                return await self._escalate(opened, held, status=W.HELD)
        published = await merger.publish(ready, await self._message(worktree))
        if published.status is merge.MergeStatus.MERGED:
            return await self._merged(opened, published.base_after)
        if published.status in (merge.MergeStatus.BASE_MOVED, merge.MergeStatus.BRANCH_MOVED):
            async with self._sessionmaker() as session, session.begin():
                return await changes.update(session, self._clock(), worktree, status=W.QUEUED)
        failed = self._result(MergeOutcome.FAILED, detail=published.detail or published.status)
        return await self._escalate(opened, failed)

    async def _merged(self, opened: Opened, merged_sha: str) -> WorktreeRead | None:
        self._counted(MergeOutcome.MERGED)
        result = self._result(MergeOutcome.MERGED, merged_sha=merged_sha)
        if opened.worktree.merge is not None:
            result = result.model_copy(update={"accepted_by": opened.worktree.merge.accepted_by})
        async with self._sessionmaker() as session, session.begin():
            merged = await changes.update(
                session,
                self._clock(),
                opened.worktree,
                status=W.MERGED,
                merge=result.model_dump(mode="json"),
                merged_at=self._clock(),
                approval_id=None,
            )
        if merged is not None and opened.workspace.cleanup_after_merge:
            merged = await self._remove(Opened(merged, opened.workspace, opened.repo))
        await self._freed(opened.workspace.project)
        log.info("worktree %s merged into %s", opened.worktree.id, opened.workspace.base_branch)
        return merged

    async def _end(self, opened: Opened, status: WorktreeStatus) -> None:
        worktree = opened.worktree
        if status is W.ABANDONED:
            # Its branch, which stays, keeps what the task had done: the removal below
            # takes the directory with whatever was not committed yet.
            committed = await self._worktrees.commit(
                opened, await self._message(worktree, note="abandoned: its task ended")
            )
            if committed is None:
                return  # changed meanwhile: the next pass
            worktree = committed
        async with self._sessionmaker() as session, session.begin():
            ended = await changes.update(
                session, self._clock(), worktree, status=status, approval_id=None
            )
        if ended is not None:
            await self._remove(Opened(ended, opened.workspace, opened.repo))
            await self._freed(opened.workspace.project)

    async def _remove(self, opened: Opened) -> WorktreeRead | None:
        """Its directory removed (its branch stays, for the record)."""
        await opened.repo.remove_worktree(opened.root)
        async with self._sessionmaker() as session, session.begin():
            return await changes.update(session, self._clock(), opened.worktree, removed=True)

    async def _freed(self, project: str) -> None:
        if self._on_freed is not None:
            await self._on_freed(project)

    # -- escalation --------------------------------------------------------------------

    async def _escalate(
        self, opened: Opened, result: MergeResult | None, *, status: WorktreeStatus = W.CONFLICT
    ) -> WorktreeRead | None:
        """Record the result and ask who resolves it: the review agent (a conflict, while
        it has attempts left), else a person."""
        worktree, workspace = opened.worktree, opened.workspace
        result = result or self._result(MergeOutcome.FAILED, detail="escalated again")
        self._counted(result.outcome)
        attempts = worktree.merge.agent_attempts if worktree.merge is not None else 0
        to_agent = (
            status is W.CONFLICT
            and result.outcome is MergeOutcome.CONFLICT
            and workspace.escalation is ConflictEscalation.AGENT
            and workspace.review_agent_id is not None
            and attempts < MAX_AGENT_ATTEMPTS
        )
        values: dict[str, Any] = {"status": status, "approval_id": None}
        if to_agent:
            assert workspace.review_agent_id is not None  # checked above
            body = RunCreate(
                agent_id=workspace.review_agent_id,
                lane=f"worktree:{worktree.id}",
                input=conflict_brief(worktree, workspace, result),
                multitask=Multitask.ENQUEUE,
                metadata={"task_id": worktree.task_id, "worktree_id": worktree.id},
            )
            # Keyed on the worktree and the attempt: a pass redone after a crash between
            # the run's creation and the row's update gets the same run, not a second.
            key = f"merge-escalation:{worktree.id}:{attempts + 1}"
            run, _ = await self._runs.create(
                body, idempotency_key=key, request_hash=request_hash([key])
            )
            result = result.model_copy(
                update={"escalation_run_id": run.id, "agent_attempts": attempts + 1}
            )
        else:
            approval = await self._approvals.request_merge(
                worktree.task_id,
                question(worktree, result),
                summary(worktree, workspace, result),
            )
            values["approval_id"] = approval.id
            result = result.model_copy(update={"agent_attempts": attempts})
        values["merge"] = result.model_dump(mode="json")
        async with self._sessionmaker() as session, session.begin():
            return await changes.update(session, self._clock(), worktree, **values)

    def _counted(self, outcome: MergeOutcome) -> None:
        if self._metrics is not None:
            self._metrics.merge_attempted(outcome.value)

    def _result(
        self,
        outcome: MergeOutcome,
        *,
        merged_sha: str | None = None,
        conflicts: tuple[ConflictFile, ...] = (),
        issues: list[Any] | tuple[Any, ...] = (),
        skipped: list[str] | tuple[str, ...] = (),
        detail: str | None = None,
    ) -> MergeResult:
        return MergeResult(
            outcome=outcome,
            merged_sha=merged_sha,
            conflicts=[
                ConflictFileRead(path=c.path, hunks=[h.text for h in c.hunks]) for c in conflicts
            ],
            issues=list(issues),
            skipped=list(skipped),
            detail=detail,
            at=self._clock(),
        )

    async def _message(self, worktree: WorktreeRead, *, note: str = "") -> str:
        async with self._sessionmaker() as session:
            task = await task_store.get_task(session, worktree.task_id)
        title = task.title if task is not None else "(task deleted)"
        if note:
            title = f"{title} ({note})"
        return f"{title}\n\nTask {worktree.task_id}, worktree {worktree.id} (Loopwright)."
