"""Merging task branches into the base in order: rebase in the task's worktree, then move
the base in one step; conflicts leave everything as it was."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from app.workspaces.repo.errors import MergeLockBusy, WorktreeDirty
from app.workspaces.repo.merge import MergeMode, MergePolicy, Merger, MergeResult, MergeStatus
from app.workspaces.repo.merge_lock import LOCK_NAME, MergeLock
from app.workspaces.repo.repository import Repository
from tests.workspaces.conftest import assert_consistent, commit_file, sh_git


async def _task(repo: Repository, tmp_path: Path, name: str, file: str, text: str) -> Path:
    """A task's worktree with one commit editing `file`."""
    path = tmp_path / name
    await repo.add_worktree(path, name, "main")
    commit_file(path, file, text, f"{name}: {file}")
    return path


def _lines(path: Path, replace: dict[int, str]) -> str:
    lines = path.read_text().splitlines(keepends=True)
    for number, text in replace.items():
        lines[number - 1] = text + "\n"
    return "".join(lines)


async def test_disjoint_edits_merge_cleanly_in_completion_order(
    repo: Repository, tmp_path: Path
) -> None:
    base = sh_git(repo.path, "rev-parse", "main")
    one = await _task(repo, tmp_path, "one", "a.txt", "A by one\n")
    two = await _task(repo, tmp_path, "two", "b.txt", "B by two\n")
    merger = Merger(repo)
    first = await merger.merge(one, "one", "main", "Merge task one")
    assert first.status is MergeStatus.MERGED and first.base_before == base
    second = await merger.merge(two, "two", "main", "Merge task two")
    assert second.status is MergeStatus.MERGED
    assert second.base_before == first.base_after  # rebased onto the first merge
    assert sh_git(repo.path, "rev-parse", "main") == second.base_after
    # One merge commit per task on the first-parent line, in the order they merged.
    assert sh_git(repo.path, "log", "--first-parent", "--format=%s", "main").splitlines() == [
        "Merge task two",
        "Merge task one",
        "initial",
    ]
    assert sh_git(repo.path, "rev-parse", "main^2") == second.head
    assert sh_git(repo.path, "rev-parse", "main^2^") == first.base_after  # linear under it
    # `main` is checked out here: its files and index followed, nothing left staged.
    assert (repo.path / "a.txt").read_text() == "A by one\n"
    assert (repo.path / "b.txt").read_text() == "B by two\n"
    assert_consistent(repo.path, one, two)
    again = await merger.merge(two, "two", "main", "Merge task two")
    assert again.status is MergeStatus.ALREADY_MERGED
    assert again.base_after == second.base_after


async def test_overlapping_edits_conflict_with_files_and_hunks_and_nothing_moves(
    repo: Repository, tmp_path: Path
) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", _lines(repo.path / "a.txt", {3: "ONE"}))
    two_path = tmp_path / "two"
    await repo.add_worktree(two_path, "two", "main")
    commit_file(two_path, "c.txt", "c by two\n")
    commit_file(two_path, "a.txt", _lines(two_path / "a.txt", {3: "TWO", 9: "TWO again"}))
    merger = Merger(repo)
    assert (await merger.merge(one, "one", "main", "one")).status is MergeStatus.MERGED
    base = sh_git(repo.path, "rev-parse", "main")
    before = sh_git(repo.path, "rev-parse", "two")

    result = await merger.merge(two_path, "two", "main", "two")

    assert result.status is MergeStatus.CONFLICT
    assert (result.base_before, result.base_after, result.head) == (base, base, before)
    assert result.stopped_at == before  # its second commit (the first, c.txt, replayed)
    [conflict] = result.conflicts
    assert (conflict.path, conflict.status, conflict.binary) == ("a.txt", "UU", False)
    [hunk] = conflict.hunks
    assert hunk.start_line == 3
    assert hunk.text.splitlines() == [
        "<<<<<<< HEAD",
        "ONE",
        f"||||||| parent of {before[:7]} (edit a.txt)",
        "a.txt line 3",
        "=======",
        "TWO",
        f">>>>>>> {before[:7]} (edit a.txt)",
    ]
    assert sh_git(repo.path, "rev-parse", "main") == base
    assert sh_git(repo.path, "rev-parse", "two") == before
    assert sh_git(two_path, "rev-parse", "HEAD") == before
    assert_consistent(repo.path, one, two_path)


async def test_rebase_then_publish_with_a_check_between(repo: Repository, tmp_path: Path) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    merger = Merger(repo)
    seen: list[MergeResult] = []

    async def refuse(ready: MergeResult) -> bool:
        seen.append(ready)
        return False

    base = sh_git(repo.path, "rev-parse", "main")
    rejected = await merger.merge(one, "one", "main", "m", check=refuse)
    assert rejected.status is MergeStatus.REJECTED and seen[0].status is MergeStatus.READY
    assert sh_git(repo.path, "rev-parse", "main") == base

    ready = await merger.rebase(one, "one", "main")
    assert ready.status is MergeStatus.READY
    changed = await repo.diff_between(ready.base_before, ready.head)  # what checks would read
    assert [(f.path, f.insertions, f.deletions) for f in changed.files] == [("a.txt", 1, 10)]
    assert await repo.read_blob(ready.head, "a.txt") == b"one\n"
    merged = await merger.publish(ready, "accepted by a person")
    assert merged.status is MergeStatus.MERGED
    assert sh_git(repo.path, "log", "-1", "--format=%s", "main") == "accepted by a person"
    with pytest.raises(ValueError, match="only a ready merge"):
        await merger.publish(merged, "twice")


async def test_publish_refuses_when_the_base_or_the_branch_moved_since_the_rebase(
    repo: Repository, tmp_path: Path
) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    merger = Merger(repo)
    ready = await merger.rebase(one, "one", "main")
    commit_file(repo.path, "b.txt", "a person's commit\n")
    moved = sh_git(repo.path, "rev-parse", "main")
    result = await merger.publish(ready, "m")
    assert (result.status, result.base_after) == (MergeStatus.BASE_MOVED, moved)
    assert sh_git(repo.path, "rev-parse", "main") == moved

    ready = await merger.rebase(one, "one", "main")
    commit_file(one, "a.txt", "one, more\n")
    assert (await merger.publish(ready, "m")).status is MergeStatus.BRANCH_MOVED
    assert (await merger.merge(one, "one", "main", "m")).status is MergeStatus.MERGED


async def test_fast_forward_mode_moves_the_base_to_the_rebased_branch(
    repo: Repository, tmp_path: Path
) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    commit_file(repo.path, "b.txt", "base moved on\n")
    merged = await Merger(repo, MergePolicy(mode=MergeMode.FAST_FORWARD)).merge(
        one, "one", "main", "unused"
    )
    assert merged.status is MergeStatus.MERGED and merged.base_after == merged.head
    assert sh_git(repo.path, "rev-parse", "main^") == merged.base_before  # linear
    assert_consistent(repo.path, one)


async def test_a_base_not_checked_out_anywhere_moves_by_compare_and_set(
    repo: Repository, tmp_path: Path
) -> None:
    sh_git(repo.path, "checkout", "-q", "-b", "someone-elses-work")
    (repo.path / "c.txt").write_text("their uncommitted edit\n")
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    merged = await Merger(repo).merge(one, "one", "main", "m")
    assert merged.status is MergeStatus.MERGED
    assert sh_git(repo.path, "rev-parse", "main") == merged.base_after
    # The main checkout was not touched: still their branch and their edit.
    assert sh_git(repo.path, "status", "--porcelain") == "M c.txt"
    assert sh_git(repo.path, "symbolic-ref", "--short", "HEAD") == "someone-elses-work"
    assert sh_git(repo.path, "reflog", "-1", "--format=%gs", "main") == "loopwright: merge one"


async def test_a_checked_out_base_with_local_changes_in_the_way_is_not_moved(
    repo: Repository, tmp_path: Path
) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    (repo.path / "a.txt").write_text("a person is editing this\n")
    base = sh_git(repo.path, "rev-parse", "main")
    result = await Merger(repo).merge(one, "one", "main", "m")
    assert result.status is MergeStatus.BASE_CHECKED_OUT_DIRTY
    assert "a.txt" in result.detail and str(repo.path) in result.detail
    assert sh_git(repo.path, "rev-parse", "main") == base
    assert (repo.path / "a.txt").read_text() == "a person is editing this\n"
    # Their edit elsewhere is no obstacle: the merge carries it, as `git merge` would.
    (repo.path / "a.txt").write_text((await repo.read_blob("main", "a.txt") or b"").decode())
    (repo.path / "c.txt").write_text("unrelated local edit\n")
    assert (await Merger(repo).merge(one, "one", "main", "m")).status is MergeStatus.MERGED
    assert sh_git(repo.path, "status", "--porcelain") == "M c.txt"


async def test_uncommitted_work_is_refused_before_anything_changes(
    repo: Repository, tmp_path: Path
) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    (one / "b.txt").write_text("not committed\n")
    with pytest.raises(WorktreeDirty) as caught:
        await Merger(repo).merge(one, "one", "main", "m")
    assert caught.value.paths == ("b.txt",)
    assert (repo.common_dir / LOCK_NAME).read_text() == ""  # nothing begun: no journal


async def test_merges_asked_at_once_run_one_at_a_time(repo: Repository, tmp_path: Path) -> None:
    tasks = [await _task(repo, tmp_path, f"t{n}", f"new{n}.txt", f"{n}\n") for n in range(4)]
    merger = Merger(repo)
    results = await asyncio.gather(
        *(merger.merge(path, path.name, "main", f"Merge {path.name}") for path in tasks)
    )
    assert [r.status for r in results] == [MergeStatus.MERGED] * 4
    # Each rebased onto the one before it: a chain, whatever order the lock gave.
    chain = sorted(
        results, key=lambda r: int(sh_git(repo.path, "rev-list", "--count", r.base_after))
    )
    for before, after in itertools.pairwise(chain):
        assert after.base_before == before.base_after
    assert sorted(p.name for p in repo.path.glob("new*.txt")) == [f"new{n}.txt" for n in range(4)]
    assert_consistent(repo.path, *tasks)


async def test_a_branch_with_nothing_new_is_already_merged(
    repo: Repository, tmp_path: Path
) -> None:
    path = tmp_path / "idle"
    await repo.add_worktree(path, "idle", "main")
    result = await Merger(repo).merge(path, "idle", "main", "m")
    assert result.status is MergeStatus.ALREADY_MERGED
    # Its only change was made on the base too: the rebase drops it as empty.
    same = await _task(repo, tmp_path, "same", "a.txt", "same\n")
    commit_file(repo.path, "a.txt", "same\n")
    assert (await Merger(repo).merge(same, "same", "main", "m")).status is (
        MergeStatus.ALREADY_MERGED
    )


async def test_merges_wait_for_the_lock_and_time_out(repo: Repository, tmp_path: Path) -> None:
    one = await _task(repo, tmp_path, "one", "a.txt", "one\n")
    async with MergeLock(repo.common_dir):
        with pytest.raises(MergeLockBusy) as caught:
            await Merger(repo, MergePolicy(lock_timeout_s=0.2)).merge(one, "one", "main", "m")
        assert '"pid":' in caught.value.holder
    assert (await Merger(repo).merge(one, "one", "main", "m")).status is MergeStatus.MERGED
