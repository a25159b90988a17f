"""The one way this service runs `git`: an argument vector (never a shell), a bound on
concurrent git processes per runner (build one per process), a time limit per call that
kills the process group, and an environment of our own (no inherited GIT_* variables, no
user or system configuration, no hooks, a fixed identity)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.workspaces.repo.errors import GitError, GitTimeout

# Per-call configuration that overrides the repository's own: what would run code or ask
# a question (hooks, fsmonitor, signing), or change what a rebase does behind our back
# (autostash, autosquash, update-refs moving other branches, rerere replaying a recorded
# resolution). diff3 conflict style: a hunk shown to a reviewer includes the base's text.
SAFE_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "rebase.autoStash=false",
    "rebase.autoSquash=false",
    "rebase.updateRefs=false",
    "rerere.enabled=false",
    "merge.conflictStyle=diff3",
    "advice.detachedHead=false",
)


@dataclass(frozen=True)
class GitIdentity:
    """Who the service's commits (and rebased commits' committer) are by."""

    name: str = "Loopwright"
    email: str = "loopwright@localhost"


@dataclass(frozen=True)
class GitPolicy:
    """Limits for one runner: how many git processes at once, how long each may take."""

    max_concurrent: int = 4
    timeout_s: float = 120.0
    search_path: str = "/usr/local/bin:/usr/bin:/bin"  # where `git` is looked up

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")


@dataclass(frozen=True)
class GitResult:
    returncode: int
    output: bytes  # stdout as git wrote it (blobs are bytes)
    stderr: str

    @property
    def stdout(self) -> str:
        return self.output.decode(errors="replace")


class GitRunner:
    """Runs git commands for every repository of one process. `in_flight` and
    `peak_in_flight` count processes started and not yet reaped (observability, tests)."""

    def __init__(self, policy: GitPolicy | None = None, identity: GitIdentity | None = None):
        self.policy = policy or GitPolicy()
        self.identity = identity or GitIdentity()
        self._slots = asyncio.Semaphore(self.policy.max_concurrent)
        self.in_flight = 0
        self.peak_in_flight = 0

    def environment(self) -> dict[str, str]:
        """Built from nothing, not from ours: an inherited GIT_DIR or GIT_INDEX_FILE would
        point every call at another repository."""
        name, email = self.identity.name, self.identity.email
        return {
            "PATH": self.policy.search_path,
            # No ~/.gitconfig, no /etc/gitconfig: the repository's config and SAFE_CONFIG.
            "HOME": os.devnull,
            "XDG_CONFIG_HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",  # never wait for a password
            "GIT_EDITOR": "true",  # never wait for an editor
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
            "LC_ALL": "C",  # messages we can read in errors
        }

    async def run(
        self,
        *args: str,
        cwd: Path,
        check: bool = True,
        timeout_s: float | None = None,
        input_bytes: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> GitResult:
        """Run `git ARGS` in `cwd`. With `check`, a non-zero exit raises GitError."""
        command = ("git", *(part for c in SAFE_CONFIG for part in ("-c", c)), *args)
        shown = ("git", *args)
        limit = timeout_s if timeout_s is not None else self.policy.timeout_s
        async with self._slots:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                out, err, code = await _run(
                    command,
                    shown,
                    cwd,
                    limit,
                    input_bytes,
                    {
                        **self.environment(),
                        **(env or {}),
                    },
                )
            finally:
                self.in_flight -= 1
        result = GitResult(code, out, err.decode(errors="replace"))
        if check and code != 0:
            raise GitError(shown, code, result.stderr)
        return result

    async def output(self, *args: str, cwd: Path) -> str:
        """The command's stdout without its trailing newline."""
        return (await self.run(*args, cwd=cwd)).stdout.rstrip("\n")


async def _run(
    command: Sequence[str],
    shown: Sequence[str],
    cwd: Path,
    timeout_s: float,
    input_bytes: bytes | None,
    env: dict[str, str],
) -> tuple[bytes, bytes, int]:
    # Its own process group, so a timeout or a cancel kills what git started too (a
    # rebase runs sub-commands); `kill_group` reaps it before the slot is given back.
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE if input_bytes is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(input_bytes), timeout_s)
    except TimeoutError:
        await kill_group(process)
        raise GitTimeout(shown, timeout_s) from None
    except BaseException:
        await kill_group(process)
        raise
    assert process.returncode is not None
    return out, err, process.returncode


async def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process's group and wait for the process (shielded: a cancel must not
    leave a zombie or a running child behind)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await asyncio.shield(process.wait())
