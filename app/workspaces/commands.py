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
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.workspaces.errors import CommandRefusal, CommandRefused
from app.workspaces.git import kill_group
from app.workspaces.paths import confine

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
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        executable,
        *argv[1:],
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own group: the kill reaches what it started
    )
    assert process.stdout is not None and process.stderr is not None
    cap = policy.output_cap_bytes
    readers = asyncio.gather(_drain(process.stdout, cap), _drain(process.stderr, cap))
    timed_out = False
    try:
        await asyncio.wait_for(process.wait(), policy.timeout_s)
    except TimeoutError:
        timed_out = True
    finally:
        # Also after a normal exit: a background child it left would hold the pipes open
        # (and outlive the tool call).
        await kill_group(process)
        if not readers.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), DRAIN_AFTER_KILL_S)
        if not readers.done():
            readers.cancel()
    (out, out_cut), (err, err_cut) = readers.result() if not readers.cancelled() else _EMPTY
    assert process.returncode is not None
    return CommandResult(
        argv,
        process.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        out_cut or err_cut,
        timed_out,
        round((time.monotonic() - started) * 1000),
    )


_EMPTY = ((b"", True), (b"", True))


async def _drain(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    kept = bytearray()
    truncated = False
    while chunk := await stream.read(READ_CHUNK):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        truncated |= len(chunk) > room
    return bytes(kept), truncated
