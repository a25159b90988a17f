"""The merge lock of a repository, and the journal of the merge that holds it.

The lock is `flock` on `<git common dir>/loopwright-merge.lock`, not a file's existence:
the kernel drops it when its holder dies, SIGKILL included, so a dead holder never leaves
a lock to break by guessing (from a pid that may be reused, or an age). What a dead holder
does leave is its journal, the file's first line: who held it and how far its merge got.
A clean release empties the file, so an acquirer that finds a journal knows the previous
merge was interrupted and repairs (recovery.py) before doing anything else.

The descriptor is close-on-exec: a git child must not inherit it, or the lock would
outlive us in an orphaned child. flock is per open file description, so two coroutines of
one process exclude each other as two processes do (local file systems; not NFS)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from types import TracebackType

from app.workspaces.repo.errors import MergeLockBusy

LOCK_NAME = "loopwright-merge.lock"


class MergeStage(StrEnum):
    """How far the journal's merge got; recovery repairs by stage."""

    LOCKED = "locked"  # holding the lock, nothing changed yet
    REBASING = "rebasing"  # `git rebase` in the task's worktree may be in progress
    PUBLISHING = "publishing"  # moving the base branch from `base_before` to `merged`


@dataclass(frozen=True)
class Journal:
    pid: int
    host: str
    acquired_at: float  # unix time
    stage: MergeStage = MergeStage.LOCKED
    worktree: str | None = None  # the task's worktree, where the rebase runs
    branch: str | None = None
    base: str | None = None
    base_before: str | None = None  # the base branch's commit when the merge began
    branch_before: str | None = None  # the branch's commit before its rebase
    merged: str | None = None  # the commit the base branch is being moved to
    synced_worktree: str | None = None  # a worktree with the base checked out, moved too

    def line(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"

    @classmethod
    def parse(cls, text: bytes) -> Journal | None:
        """The first line, or None for an empty file (a clean release). A line that is not
        a journal (a torn write) reads as an interrupted merge of unknown stage."""
        first = text.split(b"\n", 1)[0].strip()
        if not first:
            return None
        try:
            data = json.loads(first)
            data["stage"] = MergeStage(data["stage"])
            return cls(**data)
        except (ValueError, TypeError, KeyError):
            return cls(pid=0, host="", acquired_at=0.0)


class MergeLock:
    """`async with MergeLock(common_dir):` holds the repository's merge lock. `left_behind`
    is the journal of a holder that died (None after clean releases)."""

    def __init__(self, common_dir: Path, timeout_s: float = 60.0, poll_s: float = 0.05):
        self.common_dir = common_dir
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.left_behind: Journal | None = None
        self.journal: Journal | None = None
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.common_dir / LOCK_NAME

    async def __aenter__(self) -> MergeLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 4096, 0).split(b"\n", 1)[0]
                        raise MergeLockBusy(self.path, holder.decode(errors="replace")) from None
                    # Another process's merge (or this one's): waiting on the kernel's
                    # lock, which has no asynchronous wait.
                    await asyncio.sleep(self.poll_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.left_behind = Journal.parse(os.pread(fd, 1 << 16, 0))
        self.record(Journal(os.getpid(), socket.gethostname(), time.time()))
        return self

    def record(self, journal: Journal) -> None:
        """Replace the journal. The whole line is written before the file is cut to its
        length: a crash between the two leaves the new line first, old bytes after it."""
        assert self._fd is not None, "the lock is not held"
        data = journal.line()
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))
        self.journal = journal

    def advance(self, **changes: object) -> None:
        """The journal, with these fields changed."""
        assert self.journal is not None
        self.record(replace(self.journal, **changes))  # type: ignore[arg-type]

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # A merge that raised (a git error, a cancel at shutdown) after it began to
            # change things may have stopped halfway like a crashed one: its journal stays
            # for the next holder to repair.
            if error is None or self.journal is None or self.journal.stage is MergeStage.LOCKED:
                os.ftruncate(fd, 0)
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
