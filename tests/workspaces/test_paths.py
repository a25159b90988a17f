"""Confining an agent's path to its worktree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.workspaces.repo.errors import PathRefusal, PathRefused
from app.workspaces.repo.paths import confine, relative


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "worktree"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (root / ".git").write_text("gitdir: /elsewhere\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", PathRefusal.ABSOLUTE),
        ("../outside/secret.txt", PathRefusal.TRAVERSAL),
        ("src/../../outside", PathRefusal.TRAVERSAL),
        ("src/../src/pkg/mod.py", PathRefusal.TRAVERSAL),  # inside, still refused: one rule
        (".git", PathRefusal.GIT_DIR),
        (".git/config", PathRefusal.GIT_DIR),
        ("src/.GIT/hooks", PathRefusal.GIT_DIR),
        ("", PathRefusal.EMPTY),
        (".", PathRefusal.EMPTY),
        ("a\0b", PathRefusal.NUL_BYTE),
    ],
)
def test_refused(root: Path, path: str, reason: PathRefusal) -> None:
    with pytest.raises(PathRefused) as caught:
        confine(root, path)
    assert caught.value.reason is reason and caught.value.path == path


def test_allowed_paths_resolve_inside_the_root(root: Path) -> None:
    assert confine(root, "src/pkg/mod.py") == root / "src" / "pkg" / "mod.py"
    assert confine(root, "./src//pkg/") == root / "src" / "pkg"
    assert confine(root, "new/dir/file.txt") == root / "new" / "dir" / "file.txt"
    assert confine(root, ".", allow_root=True) == root
    assert confine(root, "", allow_root=True) == root
    assert confine(root, "~/x") == root / "~" / "x"  # a name, not a home directory
    assert relative(root, root / "src" / "pkg") == "src/pkg"


def test_symbolic_links_are_judged_by_where_they_land(root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside", root / "out")
    os.symlink("../outside/secret.txt", root / "secret")
    os.symlink("src/pkg", root / "inside")
    os.symlink(".git", root / "sneaky")
    os.symlink("inside/../../..", root / "chain")  # resolved whole, then judged
    for path in ("out", "out/secret.txt", "secret", "chain/etc"):
        with pytest.raises(PathRefused) as caught:
            confine(root, path)
        assert caught.value.reason is PathRefusal.SYMLINK_ESCAPE, path
    with pytest.raises(PathRefused) as caught:
        confine(root, "sneaky")
    assert caught.value.reason is PathRefusal.GIT_DIR
    assert confine(root, "inside/mod.py") == root / "src" / "pkg" / "mod.py"


def test_a_root_reached_through_a_link_works(root: Path, tmp_path: Path) -> None:
    os.symlink(root, tmp_path / "alias")
    assert confine(tmp_path / "alias", "src") == root / "src"
    assert relative(tmp_path / "alias", root / "src") == "src"
