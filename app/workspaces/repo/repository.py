"""A repository as the engine sees it: its worktrees (one per task run, each on its own
branch from the base), a worktree's commits, and what a branch changed against the base.
Merging is in merge.py; everything here is one git command or a short sequence that is
safe to repeat after a crash."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.workspaces.repo.errors import GitError, NotARepository
from app.workspaces.repo.git import GitRunner


@dataclass(frozen=True)
class WorktreeInfo:
    path: Path
    head: str | None  # the checked-out commit; None in a bare repository's entry
    branch: str | None  # short name; None when detached or bare
    bare: bool = False
    locked: bool = False
    prunable: bool = False  # its directory is gone; `prune` forgets it


@dataclass(frozen=True)
class FileStat:
    path: str
    insertions: int  # 0 for a binary file
    deletions: int
    binary: bool = False
    old_path: str | None = None  # set for a rename or a copy


@dataclass(frozen=True)
class DiffText:
    """A unified diff, cut at a size: `text` ends on a whole line, `size_bytes` is what
    git wrote in full."""

    text: str
    size_bytes: int
    truncated: bool


@dataclass(frozen=True)
class DiffStat:
    files: tuple[FileStat, ...]

    @property
    def files_changed(self) -> int:
        return len(self.files)

    @property
    def insertions(self) -> int:
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)


class Repository:
    """One git repository (normal or bare) and the worktrees the service adds to it. Build
    it with `await Repository.open(path, runner)`."""

    def __init__(self, path: Path, common_dir: Path, git: GitRunner) -> None:
        self.path = path
        self.common_dir = common_dir  # the shared `.git` directory (refs, objects, locks)
        self.git = git

    @classmethod
    async def open(cls, path: Path, git: GitRunner) -> Repository:
        path = real_path(path)
        try:
            common = await git.output("rev-parse", "--git-common-dir", cwd=path)
        except GitError as error:
            raise NotARepository(path, error.stderr.strip()) from None
        except OSError as error:  # no such directory (the working directory of git)
            raise NotARepository(path, error.strerror or str(error)) from None
        return cls(path, real_path(path / common), git)

    async def check_branch_name(self, name: str) -> None:
        """Refuse what git would not take as a branch, and anything that reads as an
        option: names reach git's command line."""
        result = await self.git.run(
            "check-ref-format", f"refs/heads/{name}", cwd=self.path, check=False
        )
        if name.startswith("-") or result.returncode != 0:
            raise ValueError(f"{name!r} is not a valid branch name")

    async def branch_head(self, branch: str) -> str | None:
        """The commit a branch points to, or None when there is no such branch."""
        result = await self.git.run(
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}^{{commit}}",
            cwd=self.path,
            check=False,
        )
        return result.stdout.strip() or None if result.returncode == 0 else None

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        result = await self.git.run(
            "merge-base", "--is-ancestor", ancestor, descendant, cwd=self.path, check=False
        )
        if result.returncode not in (0, 1):
            raise GitError(("git", "merge-base", "--is-ancestor"), result.returncode, result.stderr)
        return result.returncode == 0

    async def list_worktrees(self) -> list[WorktreeInfo]:
        out = (await self.git.run("worktree", "list", "--porcelain", "-z", cwd=self.path)).stdout
        return [_worktree(record) for record in out.split("\0\0") if record.strip("\0")]

    async def add_worktree(self, path: Path, branch: str, base: str) -> WorktreeInfo:
        """A worktree at `path` on a new branch `branch` from the base branch's tip. Safe to
        repeat: a worktree already there on that branch is returned, and a branch left by
        an earlier attempt (its worktree removed) is checked out again, not re-created."""
        await self.check_branch_name(branch)
        await self.check_branch_name(base)
        path = real_path(path)
        for worktree in await self.list_worktrees():
            if real_path(worktree.path) == path:
                if worktree.branch != branch:
                    raise GitError(
                        ("git", "worktree", "add"),
                        128,
                        f"{path} is already a worktree, on {worktree.branch or 'no branch'}",
                    )
                return worktree
        await self.git.run("worktree", "prune", cwd=self.path)
        if await self.branch_head(branch) is not None:
            await self.git.run("worktree", "add", "--", str(path), branch, cwd=self.path)
        else:
            await self.git.run(
                "worktree",
                "add",
                "-b",
                branch,
                "--",
                str(path),
                f"refs/heads/{base}",
                cwd=self.path,
            )
        for worktree in await self.list_worktrees():
            if real_path(worktree.path) == path:
                return worktree
        raise GitError(("git", "worktree", "add"), 0, f"{path} is not listed after adding it")

    async def remove_worktree(self, path: Path) -> bool:
        """Remove a worktree, its uncommitted changes with it (force), and forget worktrees
        whose directory is gone. False when it was not a worktree (already removed)."""
        target = real_path(path)
        known = {real_path(w.path) for w in await self.list_worktrees()}
        removed = False
        if target in known:
            # Twice forced: also when locked (a crashed `worktree add` leaves it locked).
            await self.git.run(
                "worktree", "remove", "--force", "--force", "--", str(target), cwd=self.path
            )
            removed = True
        await self.git.run("worktree", "prune", cwd=self.path)
        return removed

    async def delete_branch(self, branch: str) -> bool:
        """Delete a branch (merged or not). False when there was none."""
        if await self.branch_head(branch) is None:
            return False
        await self.git.run("branch", "-D", "--", branch, cwd=self.path)
        return True

    async def changed_paths(self, worktree: Path) -> list[str]:
        """Paths with uncommitted changes in the worktree, untracked files included."""
        out = await self.git.run(
            "status", "--porcelain", "-z", "--untracked-files=all", cwd=worktree
        )
        paths, records = [], out.stdout.split("\0")
        index = 0
        while index < len(records):
            record = records[index]
            if record:
                paths.append(record[3:])
                if record[0] in "RC":  # a rename's source follows as its own field
                    index += 1
            index += 1
        return paths

    async def commit_all(self, worktree: Path, message: str) -> str | None:
        """Stage everything in the worktree (`.gitignore` respected) and commit it. The new
        commit, or None when nothing changed."""
        await self.git.run("add", "--all", cwd=worktree)
        staged = await self.git.run("diff", "--cached", "--quiet", cwd=worktree, check=False)
        if staged.returncode == 0:
            return None
        await self.git.run("commit", "--quiet", "--no-verify", "-m", message, cwd=worktree)
        return await self.git.output("rev-parse", "HEAD", cwd=worktree)

    async def diff_stat(self, base: str, branch: str) -> DiffStat:
        """What `branch` changed since it left `base` (three dots: the base's own later
        commits are not counted), committed work only."""
        return await self.diff_stat_since(f"refs/heads/{base}", f"refs/heads/{branch}")

    async def diff_stat_since(self, base: str, head: str) -> DiffStat:
        """`diff_stat` of two revisions (`refs/heads/NAME`, or a commit)."""
        _check_revisions(base, head)
        out = await self.git.run(
            "diff", "--numstat", "-z", "-M", f"{base}...{head}", "--", cwd=self.path
        )
        return DiffStat(tuple(parse_numstat(out.stdout)))

    async def diff_between(self, old: str, new: str) -> DiffStat:
        """What changed from commit `old` to commit `new` (a READY merge's `base_before`
        and `head`: the files the semantic checks read at both)."""
        out = await self.git.run("diff", "--numstat", "-z", "-M", old, new, "--", cwd=self.path)
        return DiffStat(tuple(parse_numstat(out.stdout)))

    async def diff_text(self, base: str, branch: str, max_bytes: int) -> DiffText:
        """The unified diff of what `branch` changed since it left `base` (three dots, as
        `diff_stat`), committed work only, cut at `max_bytes` on a line boundary. Both are
        revisions (`refs/heads/NAME`, or a commit): a merged task's diff is the one
        between its merge commit's parents. Never an external diff program or a textconv
        filter: the repository's configuration or attributes could name any program."""
        _check_revisions(base, branch)
        out = await self.git.run(
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "-M",
            f"{base}...{branch}",
            "--",
            cwd=self.path,
        )
        return cut_diff(out.output, max_bytes)

    async def second_parent(self, commit: str) -> str | None:
        """A merge commit's second parent (the branch it merged), or None for a commit that
        is not a merge (or no commit)."""
        result = await self.git.run(
            "rev-parse", "--verify", "--quiet", f"{commit}^2^{{commit}}", cwd=self.path, check=False
        )
        return result.stdout.strip() or None if result.returncode == 0 else None

    async def read_blob(self, rev: str, path: str) -> bytes | None:
        """A file's content at a commit, or None when it has no such file."""
        result = await self.git.run("cat-file", "blob", f"{rev}:{path}", cwd=self.path, check=False)
        return result.output if result.returncode == 0 else None


def real_path(path: Path | str) -> Path:
    """The absolute path with symbolic links resolved, as git prints worktree paths (a
    metadata lookup, no file content read)."""
    return Path(os.path.realpath(path))


def _check_revisions(*revisions: str) -> None:
    """Revisions reach git's command line: none may read as an option."""
    for revision in revisions:
        if not revision or revision.startswith("-"):
            raise ValueError(f"{revision!r} is not a revision")


def cut_diff(output: bytes, max_bytes: int) -> DiffText:
    """At most `max_bytes` of a diff, ending after its last whole line (a line longer than
    the limit is cut inside it); the bytes decoded, an undecodable one replaced."""
    if len(output) <= max_bytes:
        return DiffText(output.decode(errors="replace"), len(output), truncated=False)
    kept = output[:max_bytes]
    end = kept.rfind(b"\n")
    kept = kept[: end + 1] if end >= 0 else kept
    return DiffText(kept.decode(errors="replace"), len(output), truncated=True)


def parse_numstat(out: str) -> list[FileStat]:
    """`git diff --numstat -z`: `ADDED\\tDELETED\\tPATH\\0`, or for a rename or a copy
    `ADDED\\tDELETED\\t\\0OLD\\0NEW\\0`; `-\\t-` for a binary file."""
    fields = out.split("\0")
    stats: list[FileStat] = []
    index = 0
    while index < len(fields):
        field = fields[index]
        index += 1
        if not field:
            continue
        added, deleted, path = field.split("\t", 2)
        old: str | None = None
        if not path:
            old, path = fields[index], fields[index + 1]
            index += 2
        binary = added == "-"
        stats.append(
            FileStat(path, 0 if binary else int(added), 0 if binary else int(deleted), binary, old)
        )
    return stats


def _worktree(record: str) -> WorktreeInfo:
    fields: dict[str, str] = {}
    for line in record.strip("\0").split("\0"):
        key, _, value = line.partition(" ")
        fields[key] = value
    branch = fields.get("branch")
    return WorktreeInfo(
        path=Path(fields["worktree"]),
        head=fields.get("HEAD"),
        branch=branch.removeprefix("refs/heads/") if branch else None,
        bare="bare" in fields,
        locked="locked" in fields,
        prunable="prunable" in fields,
    )
