"""The git runner: its own environment, typed errors, the time limit, the bound on
concurrent git processes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from app.workspaces.repo.errors import GitError, GitTimeout
from app.workspaces.repo.git import GitIdentity, GitPolicy, GitRunner
from app.workspaces.repo.repository import real_path
from tests.workspaces.conftest import sh_git


async def test_inherited_git_variables_do_not_leak(
    repo_path: Path, runner: GitRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set in our own environment, these would point git at another repository or identity.
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Intruder")
    top = await runner.output("rev-parse", "--show-toplevel", cwd=repo_path)
    assert Path(top) == real_path(repo_path)
    env = runner.environment()
    assert env["GIT_AUTHOR_NAME"] == "Loopwright"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1"


async def test_commits_carry_the_given_identity_and_skip_the_repositorys_hooks(
    repo_path: Path,
) -> None:
    hook = repo_path / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")  # would refuse every commit
    hook.chmod(0o755)
    runner = GitRunner(identity=GitIdentity("Agent Smith", "smith@example.com"))
    (repo_path / "new.txt").write_text("x\n")
    await runner.run("add", "new.txt", cwd=repo_path)
    await runner.run("commit", "-q", "-m", "by the agent", cwd=repo_path)
    assert sh_git(repo_path, "log", "-1", "--format=%an <%ae> / %cn") == (
        "Agent Smith <smith@example.com> / Agent Smith"
    )


async def test_a_failing_command_raises_with_its_command_code_and_stderr(
    repo_path: Path, runner: GitRunner
) -> None:
    with pytest.raises(GitError) as caught:
        await runner.run("rev-parse", "--verify", "no-such-ref", cwd=repo_path)
    assert caught.value.command == ("git", "rev-parse", "--verify", "no-such-ref")
    assert caught.value.returncode == 128
    assert "Needed a single revision" in caught.value.stderr
    unchecked = await runner.run("rev-parse", "--verify", "nope", cwd=repo_path, check=False)
    assert unchecked.returncode == 128


async def test_a_command_past_its_time_limit_is_killed_with_its_children(
    repo_path: Path, runner: GitRunner
) -> None:
    pid_file = repo_path / "nap.pid"
    # An alias runs a shell command: the git process's child, in its process group.
    nap = f"alias.nap=!echo $$ > {pid_file}; exec sleep 60"
    started = time.monotonic()
    with pytest.raises(GitTimeout) as caught:
        await runner.run("-c", nap, "nap", cwd=repo_path, timeout_s=1.0)
    assert time.monotonic() - started < 10
    assert caught.value.timeout_s == 1.0 and caught.value.returncode == -9
    assert runner.in_flight == 0
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(sleeper):  # watching another process die; nothing to inject
        assert time.monotonic() < deadline, "the child outlived the time limit"
        await asyncio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by init) is dead too.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


async def test_concurrent_git_processes_never_exceed_the_bound(repo_path: Path) -> None:
    runner = GitRunner(GitPolicy(max_concurrent=2))
    seen: list[int] = []

    async def one() -> None:
        await runner.run("status", "--porcelain", cwd=repo_path)
        seen.append(runner.in_flight)

    await asyncio.gather(*(one() for _ in range(12)))
    assert len(seen) == 12
    assert runner.peak_in_flight == 2  # twelve asked at once; two ran at a time
    assert runner.in_flight == 0


def test_policies_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_concurrent"):
        GitPolicy(max_concurrent=0)
    with pytest.raises(ValueError, match="timeout_s"):
        GitPolicy(timeout_s=0)
