"""Real git repositories in temporary directories. Setup and checks call `git` directly
(`sh_git`), not through the code under test, with the same isolation from the user's
configuration."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from app.workspaces.repo.git import GitRunner
from app.workspaces.repo.repository import Repository

ISOLATED = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test Person",
    "GIT_AUTHOR_EMAIL": "person@example.com",
    "GIT_COMMITTER_NAME": "Test Person",
    "GIT_COMMITTER_EMAIL": "person@example.com",
    "LC_ALL": "C",
}


def sh_git(cwd: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=ISOLATED, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def commit_file(worktree: Path, name: str, content: str, message: str = "") -> str:
    path = worktree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    sh_git(worktree, "add", "--", name)
    sh_git(worktree, "commit", "-q", "-m", message or f"edit {name}")
    return sh_git(worktree, "rev-parse", "HEAD")


def make_repo(path: Path) -> Path:
    """A repository on `main` with three files, `main` checked out."""
    path.mkdir(parents=True)
    sh_git(path, "init", "-q", "-b", "main")
    for name in ("a.txt", "b.txt", "c.txt"):
        (path / name).write_text("".join(f"{name} line {n}\n" for n in range(1, 11)))
    sh_git(path, "add", "-A")
    sh_git(path, "commit", "-q", "-m", "initial")
    return path


def assert_consistent(repo: Path, *worktrees: Path) -> None:
    """`git fsck` finds no error, and every worktree's status is clean."""
    fsck = subprocess.run(
        ["git", "fsck", "--no-progress"],
        cwd=repo,
        env=ISOLATED,
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0, fsck.stderr
    assert "error" not in fsck.stderr and "missing" not in fsck.stdout, fsck.stdout
    for worktree in (repo, *worktrees):
        assert sh_git(worktree, "status", "--porcelain") == "", worktree
        git_dir = Path(sh_git(worktree, "rev-parse", "--absolute-git-dir"))
        assert not (git_dir / "rebase-merge").exists() and not (git_dir / "rebase-apply").exists()


@pytest.fixture
def runner() -> GitRunner:
    return GitRunner()


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
async def repo(repo_path: Path, runner: GitRunner) -> Repository:
    return await Repository.open(repo_path, runner)
