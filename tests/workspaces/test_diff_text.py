"""A branch's unified diff against its base: three dots (the base's later work left out),
cut at a size on a line, never through a program the repository names."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.workspaces.repo.repository import Repository, cut_diff
from tests.workspaces.conftest import commit_file, sh_git


async def test_the_diff_of_a_branch_against_its_base(repo: Repository, tmp_path: Path) -> None:
    sh_git(repo.path, "branch", "work")
    tree = tmp_path / "work"
    sh_git(repo.path, "worktree", "add", "-q", str(tree), "work")
    commit_file(tree, "a.txt", "changed\n")
    commit_file(repo.path, "b.txt", "the base's own\n")
    # A textconv filter the repository names (attributes are read from the checkout the
    # command runs in) would run on a diff: it must not.
    marker = tmp_path / "ran"
    sh_git(repo.path, "config", "diff.evil.textconv", f"touch {marker}; cat")
    (repo.path / ".gitattributes").write_text("*.txt diff=evil\n")

    diff = await repo.diff_text("refs/heads/main", "refs/heads/work", 100_000)
    assert not diff.truncated and diff.size_bytes == len(diff.text.encode())
    assert "+changed\n" in diff.text and "-a.txt line 1\n" in diff.text
    assert "b.txt" not in diff.text
    assert not marker.exists()

    cut = await repo.diff_text("refs/heads/main", "refs/heads/work", 200)
    assert cut.truncated and cut.size_bytes == diff.size_bytes
    assert diff.text.startswith(cut.text) and cut.text.endswith("\n")
    assert len(cut.text.encode()) <= 200

    for wrong in ("--output=/tmp/x", ""):
        with pytest.raises(ValueError, match="not a revision"):
            await repo.diff_text(wrong, "refs/heads/work", 1_000)


async def test_second_parent_names_a_merged_branch(repo: Repository) -> None:
    sh_git(repo.path, "checkout", "-q", "-b", "side")
    side = commit_file(repo.path, "s.txt", "side\n")
    sh_git(repo.path, "checkout", "-q", "main")
    commit_file(repo.path, "m.txt", "main\n")
    sh_git(repo.path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert await repo.second_parent("main") == side
    assert await repo.second_parent("main~1") is None  # not a merge
    assert await repo.second_parent("nothing") is None


def test_a_line_longer_than_the_limit_is_cut_inside() -> None:
    assert cut_diff(b"x" * 50, 10).text == "x" * 10
    assert cut_diff(b"ab\ncd\n", 4).text == "ab\n"
    assert cut_diff("é\n".encode(), 1).text == "\ufffd"  # half a character, replaced
