"""run_command: the allowlist, no shell, a scrubbed environment, a time limit that kills
the process group, an output cap."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from app.workspaces.repo.commands import CommandPolicy, run_command
from app.workspaces.repo.errors import CommandRefusal, CommandRefused, PathRefused

POLICY = CommandPolicy(allowlist=frozenset({"echo", "env", "pwd", "sh", "head", "ls"}))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "worktree"
    root.mkdir()
    return root


async def test_an_allowed_program_runs_in_the_worktree_without_a_shell(root: Path) -> None:
    result = await run_command(["echo", "$HOME; rm -rf /", "*"], cwd=root, policy=POLICY)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "$HOME; rm -rf / *\n", "")
    assert (result.truncated, result.timed_out) == (False, False)
    assert result.argv == ("echo", "$HOME; rm -rf /", "*")
    where = await run_command(["pwd"], cwd=root, policy=POLICY)
    assert where.stdout.strip() == str(root)
    failing = await run_command(["ls", "no-such-file"], cwd=root, policy=POLICY)
    assert failing.exit_code != 0 and "no-such-file" in failing.stderr


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["rm", "-rf", "."], CommandRefusal.NOT_ALLOWED),
        (["/bin/sh", "-c", "true"], CommandRefusal.NOT_ALLOWED),  # `sh` is allowed, a path not
        (["./echo"], CommandRefusal.NOT_ALLOWED),
        ([], CommandRefusal.EMPTY),
        ([""], CommandRefusal.EMPTY),
        (["echo", "a\0b"], CommandRefusal.BAD_ARGUMENT),
    ],
)
async def test_refused_before_running(root: Path, argv: list[str], reason: CommandRefusal) -> None:
    with pytest.raises(CommandRefused) as caught:
        await run_command(argv, cwd=root, policy=POLICY)
    assert caught.value.reason is reason


async def test_programs_are_found_on_the_fixed_path_not_in_the_worktree(root: Path) -> None:
    planted = root / "echo"
    planted.write_text("#!/bin/sh\necho planted\n")
    planted.chmod(0o755)
    assert (await run_command(["echo", "real"], cwd=root, policy=POLICY)).stdout == "real\n"
    missing = CommandPolicy(allowlist=frozenset({"no-such-program"}))
    with pytest.raises(CommandRefused) as caught:
        await run_command(["no-such-program"], cwd=root, policy=missing)
    assert caught.value.reason is CommandRefusal.NOT_FOUND
    # A path runs only when the allowlist names that exact path, confined if relative.
    script = CommandPolicy(allowlist=frozenset({"./echo", "../escape"}))
    ran = await run_command(["./echo"], cwd=root, policy=script)
    assert ran.stdout == "planted\n"
    with pytest.raises(PathRefused):
        await run_command(["../escape"], cwd=root, policy=script)


async def test_the_environment_is_scrubbed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("LOOPWRIGHT_DATABASE__URL", "postgresql://secret")
    policy = CommandPolicy(allowlist=frozenset({"env"}), extra_env=(("CI", "1"),))
    result = await run_command(["env"], cwd=root, policy=policy)
    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "CI"}
    assert env["PATH"] == policy.search_path and env["CI"] == "1"
    assert not await asyncio.to_thread(os.path.lexists, env["HOME"])  # its own, removed after
    assert not Path(env["HOME"]).is_relative_to(root)


async def test_a_command_past_its_time_limit_is_killed_with_its_children(root: Path) -> None:
    policy = CommandPolicy(allowlist=frozenset({"sh"}), timeout_s=1.0)
    started = time.monotonic()
    result = await run_command(
        ["sh", "-c", "echo started; sleep 60 & echo $! > child.pid; wait"],
        cwd=root,
        policy=policy,
    )
    assert time.monotonic() - started < 10
    assert (result.timed_out, result.exit_code, result.stdout) == (True, -9, "started\n")
    child = int((root / "child.pid").read_text())
    assert not _running(child)


async def test_a_background_child_does_not_outlive_a_command_that_exited(root: Path) -> None:
    policy = CommandPolicy(allowlist=frozenset({"sh"}), timeout_s=30.0)
    started = time.monotonic()
    result = await run_command(
        ["sh", "-c", "sleep 60 & echo $! > child.pid; echo done"], cwd=root, policy=policy
    )
    assert time.monotonic() - started < 10  # not held until the child ends
    assert (result.exit_code, result.timed_out, result.stdout) == (0, False, "done\n")
    assert not _running(int((root / "child.pid").read_text()))


def _running(pid: int) -> bool:
    """Alive and not a zombie, after a short grace for the kernel to deliver the kill."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # watching another process; nothing to inject
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return False
        except (ProcessLookupError, FileNotFoundError):
            return False
        time.sleep(0.05)
    return True


async def test_output_is_capped_with_a_flag(root: Path) -> None:
    policy = CommandPolicy(allowlist=frozenset({"head"}), output_cap_bytes=1000)
    result = await run_command(["head", "-c", "200000", "/dev/zero"], cwd=root, policy=policy)
    assert (result.exit_code, len(result.stdout), result.truncated) == (0, 1000, True)
    small = await run_command(["head", "-c", "10", "/dev/zero"], cwd=root, policy=policy)
    assert (len(small.stdout), small.truncated) == (10, False)


def test_a_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        CommandPolicy(allowlist=frozenset(), timeout_s=0)
