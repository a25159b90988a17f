"""What a stopped rebase conflicts on, for the person or the review agent who resolves it:
each conflicting file with git's two-letter state and its conflict-marked hunks (diff3
style: the base's text between `|||||||` and `=======`), within limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.workspaces.repo.git import GitRunner

# `git status --porcelain` states of an unmerged path.
UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


@dataclass(frozen=True)
class ConflictLimits:
    max_files: int = 50  # files whose hunks are read; later ones are listed without
    max_hunks_per_file: int = 20
    max_hunk_chars: int = 8_000
    max_file_bytes: int = 1_000_000  # a larger file is listed without hunks


@dataclass(frozen=True)
class ConflictHunk:
    start_line: int  # 1-based line of `<<<<<<<` in the conflict-marked file
    end_line: int  # line of `>>>>>>>`
    text: str  # the hunk with its markers
    truncated: bool = False  # cut at max_hunk_chars


@dataclass(frozen=True)
class ConflictFile:
    path: str
    # Git's two letters, ours (the base) then theirs (the branch's commit): UU both
    # modified, AA both added, DU deleted in the base, UD deleted by the branch, ...
    status: str
    hunks: tuple[ConflictHunk, ...] = ()
    binary: bool = False  # no text hunks to show
    truncated: bool = False  # hunks beyond the limits, or the file was too large to read


async def collect_conflicts(
    git: GitRunner, worktree: Path, limits: ConflictLimits
) -> tuple[ConflictFile, ...]:
    """The unmerged paths of the worktree's stopped rebase or merge."""
    out = await git.run("status", "--porcelain", "-z", "--untracked-files=no", cwd=worktree)
    records = out.stdout.split("\0")
    files: list[ConflictFile] = []
    index = 0
    while index < len(records):
        record = records[index]
        index += 1
        if not record:
            continue
        state, path = record[:2], record[3:]
        if state[0] in "RC":
            index += 1  # the rename's source
        if state not in UNMERGED:
            continue
        if len(files) >= limits.max_files:
            files.append(ConflictFile(path, state, truncated=True))
        else:
            files.append(_read(worktree, path, state, limits))
    return tuple(files)


def _read(worktree: Path, path: str, state: str, limits: ConflictLimits) -> ConflictFile:
    file = worktree / path
    if file.is_symlink() or not file.is_file():
        return ConflictFile(path, state)  # deleted on one side: nothing marked to show
    if file.stat().st_size > limits.max_file_bytes:
        return ConflictFile(path, state, truncated=True)
    data = file.read_bytes()
    if b"\0" in data[:8000]:
        return ConflictFile(path, state, binary=True)
    hunks, truncated = conflict_hunks(data.decode(errors="replace"), limits)
    return ConflictFile(path, state, hunks, truncated=truncated)


def conflict_hunks(text: str, limits: ConflictLimits) -> tuple[tuple[ConflictHunk, ...], bool]:
    """The `<<<<<<<` … `>>>>>>>` blocks of a conflict-marked text; True when some were
    left out or cut."""
    hunks: list[ConflictHunk] = []
    truncated = False
    start: int | None = None
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if start is None:
            if line.startswith("<<<<<<< ") or line.rstrip("\r\n") == "<<<<<<<":
                start, lines = number, [line]
            continue
        lines.append(line)
        if line.startswith(">>>>>>> ") or line.rstrip("\r\n") == ">>>>>>>":
            if len(hunks) >= limits.max_hunks_per_file:
                truncated = True
            else:
                body = "".join(lines)
                cut = len(body) > limits.max_hunk_chars
                truncated |= cut
                hunks.append(ConflictHunk(start, number, body[: limits.max_hunk_chars], cut))
            start = None
    return tuple(hunks), truncated
