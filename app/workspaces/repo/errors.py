"""The workspace layer's errors. Each carries what a caller acts on; `reason` values are
stable (match on them, not on the message). The engine turns them into tool results or
problem documents: this package knows no HTTP.

    WorkspaceError
    ├── GitError (command, returncode, stderr)
    │   └── GitTimeout (timeout_s)
    ├── NotARepository (path)
    ├── WorktreeDirty (worktree, paths)
    ├── MergeLockBusy (lock_path, holder)
    ├── PathRefused (reason: PathRefusal, path)
    ├── FileToolError (reason: FileToolFailure, path)
    ├── PatchRejected (reason: PatchFailure, detail)
    └── CommandRefused (reason: CommandRefusal, program)
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path


class WorkspaceError(Exception):
    """A workspace operation failed."""


class GitError(WorkspaceError):
    """A git command exited with an error."""

    def __init__(self, command: Sequence[str], returncode: int, stderr: str) -> None:
        self.command = tuple(command)
        self.returncode = returncode
        self.stderr = stderr
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
        super().__init__(f"`{' '.join(self.command)}` exited with {returncode}: {last}")


class GitTimeout(GitError):
    """A git command ran past its time limit and was killed."""

    def __init__(self, command: Sequence[str], timeout_s: float, stderr: str = "") -> None:
        self.timeout_s = timeout_s
        super().__init__(command, -9, stderr or f"killed after {timeout_s:g} s")


class NotARepository(WorkspaceError):
    """The path is not a git repository."""

    def __init__(self, path: Path, detail: str) -> None:
        self.path = path
        super().__init__(f"{path} is not a git repository: {detail}")


class WorktreeDirty(WorkspaceError):
    """The worktree has uncommitted changes; commit them before merging."""

    def __init__(self, worktree: Path, paths: Sequence[str]) -> None:
        self.worktree = worktree
        self.paths = tuple(paths)
        shown = ", ".join(self.paths[:5]) + (" …" if len(self.paths) > 5 else "")
        super().__init__(f"{worktree} has uncommitted changes: {shown}")


class MergeLockBusy(WorkspaceError):
    """Another merge holds the repository's merge lock."""

    def __init__(self, lock_path: Path, holder: str) -> None:
        self.lock_path = lock_path
        self.holder = holder
        super().__init__(f"the merge lock {lock_path} is held: {holder or 'holder unknown'}")


class PathRefusal(StrEnum):
    """Why a path given to a file tool was refused."""

    EMPTY = "empty"  # no path at all where a file is needed
    NUL_BYTE = "nul_byte"  # a NUL character: no file system takes one
    ABSOLUTE = "absolute"  # `/etc/passwd`: paths are relative to the worktree
    TRAVERSAL = "traversal"  # a `..` component, even one that would stay inside
    GIT_DIR = "git_dir"  # `.git` (the repository's own data) at any depth
    SYMLINK_ESCAPE = "symlink_escape"  # a symbolic link along the path points outside


class PathRefused(WorkspaceError):
    """The path is not allowed inside the worktree."""

    def __init__(self, reason: PathRefusal, path: str) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"path {path!r} refused: {reason.value}")


class FileToolFailure(StrEnum):
    """Why a file tool could not do its work on an allowed path."""

    NOT_FOUND = "not_found"  # nothing at the path
    NOT_A_FILE = "not_a_file"  # a directory (or a device) where a file is needed
    NOT_A_DIRECTORY = "not_a_directory"  # a file where a directory is needed
    TOO_LARGE = "too_large"  # the content to write is over the limit
    INVALID_PATTERN = "invalid_pattern"  # a search regex that does not compile


class FileToolError(WorkspaceError):
    """The file tool could not complete."""

    def __init__(self, reason: FileToolFailure, path: str, detail: str = "") -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path!r}: {reason.value}" + (f" ({detail})" if detail else ""))


class PatchFailure(StrEnum):
    """Why a patch was not applied."""

    EMPTY = "empty"  # no file changes found in the text
    UNSAFE_PATH = "unsafe_path"  # a path in it escapes the worktree (see PathRefusal)
    SYMLINK = "symlink"  # it creates a symbolic link: links are not written by tools
    DOES_NOT_APPLY = "does_not_apply"  # `git apply --check` refused it; `detail` says why


class PatchRejected(WorkspaceError):
    """The patch was not applied; nothing changed."""

    def __init__(self, reason: PatchFailure, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"patch rejected ({reason.value}): {detail}")


class CommandRefusal(StrEnum):
    """Why a command was not started."""

    EMPTY = "empty"  # no program named
    NOT_ALLOWED = "not_allowed"  # the program is not in the workspace's allowlist
    NOT_FOUND = "not_found"  # allowed, but not found on the command PATH
    BAD_ARGUMENT = "bad_argument"  # an argument with a NUL character


class CommandRefused(WorkspaceError):
    """The command was refused before it ran."""

    def __init__(self, reason: CommandRefusal, program: str) -> None:
        self.reason = reason
        self.program = program
        super().__init__(f"command {program!r} refused: {reason.value}")
