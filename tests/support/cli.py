"""The `loopwright` command run as a person runs it: a subprocess of the installed entry
point, with its output captured, or at a terminal (a pty) whose prompts a test answers."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))


@dataclass(frozen=True)
class Finished:
    code: int
    out: str
    err: str


def _env(url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWRIGHT_")}
    return {**env, "LOOPWRIGHT_URL": url, **(extra or {})}


async def cli(
    url: str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout_s: float = 60,
    command: Sequence[str] = (LOOPWRIGHT,),
) -> Finished:
    """`loopwright ARGS` against the server at `url` (given as LOOPWRIGHT_URL, with `env`),
    stdin closed; `command` runs another program in its place."""
    process = await asyncio.create_subprocess_exec(
        *command,
        *args,
        env=_env(url, env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(timeout_s):
        out, err = await process.communicate()
    assert process.returncode is not None
    return Finished(process.returncode, out.decode(), err.decode())


async def at_terminal(
    url: str, *args: str, answers: list[tuple[str, str]], timeout_s: float = 60
) -> Finished:
    """`loopwright ARGS` at a terminal: `answers` are (prompt, answer) in the order they
    are asked; each answer is typed once its prompt shows. `out` is what the terminal
    showed."""
    controller, terminal = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        LOOPWRIGHT, *args, env=_env(url), stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    shown = ""
    pending = list(answers)
    seen = 0  # where the next prompt is looked for
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    chunk = await asyncio.to_thread(os.read, controller, 4096)
                except OSError:  # the terminal closed: the command ended
                    break
                if not chunk:
                    break
                shown += chunk.decode(errors="replace")
                if pending and (at := shown.find(pending[0][0], seen)) >= 0:
                    prompt, answer = pending.pop(0)
                    seen = at + len(prompt)
                    os.write(controller, answer.encode() + b"\n")
            code = await process.wait()
    finally:
        os.close(controller)
        if process.returncode is None:
            process.kill()
    return Finished(code, shown, "")
