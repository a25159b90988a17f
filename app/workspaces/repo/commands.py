"""`run_command` for agents: a program from the workspace's allowlist, run in the
worktree with an argument vector (no shell, so no `;`, pipes or globs to smuggle in), a
scrubbed environment, a time limit and an output cap.

The allowlist names programs, looked up on a fixed PATH, never in the worktree (an agent
could write `./pytest` there). A path (`/bin/sh`, `./tests/run.sh`) runs only when the
allowlist holds that exact string. The program runs with the service's own rights: an
allowed interpreter (`python`, `sh`) can do anything they can, so allow with care."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.workspaces.repo.errors import CommandRefusal, CommandRefused
from app.workspaces.repo.paths import confine

READ_CHUNK = 65_536
DRAIN_AFTER_KILL_S = 5.0  # pipes held by a child that left the group are abandoned after


@dataclass(frozen=True)
class CommandPolicy:
    allowlist: frozenset[str]
    timeout_s: float = 120.0
    output_cap_bytes: int = 64_000  # per stream (stdout, stderr); the rest is read, dropped
    search_path: str = "/usr/local/bin:/usr/bin:/bin"
    extra_env: tuple[tuple[str, str], ...] = ()  # e.g. (("PYTHONDONTWRITEBYTECODE", "1"),)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.output_cap_bytes < 0:
            raise ValueError("timeout_s must be positive and output_cap_bytes not negative")


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_code: int  # negative: killed by that signal (-9 after a timeout)
    stdout: str
    stderr: str
    truncated: bool  # a stream passed output_cap_bytes
    timed_out: bool
    duration_ms: int


def resolve_program(program: str, *, cwd: Path, policy: CommandPolicy) -> str:
    """The executable to start for `program`, or CommandRefused."""
    if not program:
        raise CommandRefused(CommandRefusal.EMPTY, program)
    if program not in policy.allowlist:
        raise CommandRefused(CommandRefusal.NOT_ALLOWED, program)
    if "/" in program:
        return program if program.startswith("/") else str(confine(cwd, program))
    found = shutil.which(program, path=policy.search_path)
    if found is None:
        raise CommandRefused(CommandRefusal.NOT_FOUND, program)
    return found


async def run_command(argv: Sequence[str], *, cwd: Path, policy: CommandPolicy) -> CommandResult:
    if not argv:
        raise CommandRefused(CommandRefusal.EMPTY, "")
    if any("\0" in arg for arg in argv):
        raise CommandRefused(CommandRefusal.BAD_ARGUMENT, argv[0])
    executable = resolve_program(argv[0], cwd=cwd, policy=policy)
    home = await asyncio.to_thread(tempfile.mkdtemp, prefix="loopwright-command-")
    try:
        return await _run(tuple(argv), executable, cwd, home, policy)
    finally:
        await asyncio.to_thread(shutil.rmtree, home, True)


async def _run(
    argv: tuple[str, ...], executable: str, cwd: Path, home: str, policy: CommandPolicy
) -> CommandResult:
    # Nothing of ours is passed on (no keys, no database URL): a fixed PATH, a HOME and
    # TMPDIR of its own, removed after, so nothing lands in the worktree's diff.
    env = {"PATH": policy.search_path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
    env.update(policy.extra_env)
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    transport, protocol = await loop.subprocess_exec(
        lambda: _Protocol(loop),
        executable,
        *argv[1:],
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own group: the kill reaches what it started
    )
    process = asyncio.subprocess.Process(transport, protocol, loop)
    assert process.stdout is not None and process.stderr is not None
    out, err = _Sink(policy.output_cap_bytes), _Sink(policy.output_cap_bytes)
    readers = asyncio.gather(out.drain(process.stdout), err.drain(process.stderr))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(protocol.exited), policy.timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        # Also after a normal exit: a background child it left would hold the pipes open
        # (and outlive the tool call). One that left the group too is cut off after a
        # grace: its pipes are closed on it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(readers), DRAIN_AFTER_KILL_S)
        if not readers.done():
            readers.cancel()
            transport.close()
        await asyncio.shield(protocol.exited)
    returncode = transport.get_returncode()
    assert returncode is not None
    return CommandResult(
        argv,
        returncode,
        out.text(),
        err.text(),
        out.truncated or err.truncated,
        timed_out,
        round((time.monotonic() - started) * 1000),
    )


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own protocol, telling when the process exits. `Process.wait()` answers
    only once its pipes close too, which a background child can put off for ever."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=READ_CHUNK, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


class _Sink:
    """One output stream, kept up to the cap; the rest is read and dropped, so a chatty
    program never blocks on a full pipe."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.truncated = False

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(READ_CHUNK):
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.truncated |= len(chunk) > room

    def text(self) -> str:
        return self.kept.decode(errors="replace")
