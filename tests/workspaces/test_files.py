"""The file tools: read, list, search, write, inside one worktree and within caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.workspaces.repo.errors import FileToolError, FileToolFailure, PathRefusal, PathRefused
from app.workspaces.repo.files import (
    Entry,
    EntryKind,
    FileLimits,
    list_files,
    read_file,
    search,
    write_file,
)

LIMITS = FileLimits()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "worktree"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    (root / "src" / "data.bin").write_bytes(b"\x89PNG\0\0hello")
    (root / "README.md").write_text("# Hello\nSay hello.\n")
    (root / ".git").write_text("gitdir: elsewhere\n")
    return root


async def test_read_text_binary_and_cut(root: Path) -> None:
    read = await read_file(root, "src/app.py", LIMITS)
    assert (read.path, read.text, read.binary, read.truncated) == (
        "src/app.py",
        "def main():\n    return 'hello'\n",
        False,
        False,
    )
    binary = await read_file(root, "src/data.bin", LIMITS)
    assert (binary.text, binary.binary, binary.size) == (None, True, 11)
    (root / "long.txt").write_text("é" * 10)  # two bytes each: the cut lands mid-character
    cut = await read_file(root, "long.txt", FileLimits(read_max_bytes=5))
    assert (cut.text, cut.truncated, cut.size) == ("éé", True, 20)


async def test_read_refuses_what_is_not_a_file_or_not_allowed(root: Path) -> None:
    with pytest.raises(FileToolError) as caught:
        await read_file(root, "src", LIMITS)
    assert caught.value.reason is FileToolFailure.NOT_A_FILE
    with pytest.raises(FileToolError) as caught:
        await read_file(root, "missing.txt", LIMITS)
    assert caught.value.reason is FileToolFailure.NOT_FOUND
    with pytest.raises(PathRefused) as refused:
        await read_file(root, "../worktree/README.md", LIMITS)
    assert refused.value.reason is PathRefusal.TRAVERSAL


async def test_list_skips_git_and_does_not_follow_links(root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, root / "up")
    top = await list_files(root, limits=LIMITS)
    assert top.entries == (
        Entry("README.md", EntryKind.FILE, 19),
        Entry("src", EntryKind.DIRECTORY, None),
        Entry("up", EntryKind.SYMLINK, None),
    )
    deep = await list_files(root, ".", recursive=True, limits=LIMITS)
    assert [e.path for e in deep.entries] == [
        "README.md",
        "src",
        "src/app.py",
        "src/data.bin",
        "up",
    ]
    capped = await list_files(root, recursive=True, limits=FileLimits(list_max_entries=2))
    assert (len(capped.entries), capped.truncated) == (2, True)
    inside = await list_files(root, "src", limits=LIMITS)
    assert [e.path for e in inside.entries] == ["src/app.py", "src/data.bin"]
    with pytest.raises(FileToolError) as caught:
        await list_files(root, "README.md", limits=LIMITS)
    assert caught.value.reason is FileToolFailure.NOT_A_DIRECTORY


async def test_search_literal_and_regex_skipping_binaries(root: Path) -> None:
    found = await search(root, "hello", limits=LIMITS)
    assert [(m.path, m.line, m.text) for m in found.matches] == [
        ("README.md", 2, "Say hello."),
        ("src/app.py", 2, "    return 'hello'"),
    ]
    assert (found.files_searched, found.files_skipped, found.truncated) == (3, 1, False)
    assert len((await search(root, "HELLO", ignore_case=True, limits=LIMITS)).matches) == 3
    assert (await search(root, ".*", limits=LIMITS)).matches == ()  # literal: no regex
    assert [m.line for m in (await search(root, "main()", limits=LIMITS)).matches] == [1]
    regex = await search(root, r"^def \w+\(", regex=True, limits=LIMITS)
    assert [(m.path, m.line) for m in regex.matches] == [("src/app.py", 1)]
    one_file = await search(root, "hello", "README.md", limits=LIMITS)
    assert [m.path for m in one_file.matches] == ["README.md"]
    capped = await search(root, "l", limits=FileLimits(search_max_matches=2))
    assert (len(capped.matches), capped.truncated) == (2, True)
    with pytest.raises(FileToolError) as caught:
        await search(root, "(", regex=True, limits=LIMITS)
    assert caught.value.reason is FileToolFailure.INVALID_PATTERN
    big = await search(root, "hello", limits=FileLimits(search_max_file_bytes=10))
    assert big.matches == () and big.files_skipped == 3


async def test_write_creates_replaces_and_is_idempotent(root: Path) -> None:
    created = await write_file(root, "new/deep/file.txt", "one\n", LIMITS)
    assert (created.path, created.changed, created.created, created.size) == (
        "new/deep/file.txt",
        True,
        True,
        4,
    )
    target = root / "new" / "deep" / "file.txt"
    target.chmod(0o755)
    stamp = target.stat().st_mtime_ns
    again = await write_file(root, "new/deep/file.txt", "one\n", LIMITS)
    assert (again.changed, again.created) == (False, False)
    assert target.stat().st_mtime_ns == stamp  # not written at all
    changed = await write_file(root, "new/deep/file.txt", "two\n", LIMITS)
    assert (changed.changed, changed.created) == (True, False)
    assert target.read_text() == "two\n"
    assert target.stat().st_mode & 0o777 == 0o755  # kept across the replacement
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]  # no temporaries


async def test_write_refusals(root: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path, root / "up")
    for path, reason in [
        ("up/escaped.txt", PathRefusal.SYMLINK_ESCAPE),
        (".git", PathRefusal.GIT_DIR),
        ("/tmp/x", PathRefusal.ABSOLUTE),
    ]:
        with pytest.raises(PathRefused) as refused:
            await write_file(root, path, "x", LIMITS)
        assert refused.value.reason is reason
    assert not (tmp_path / "escaped.txt").exists()
    for path, failure in [
        ("src", FileToolFailure.NOT_A_FILE),
        ("README.md/child.txt", FileToolFailure.NOT_A_DIRECTORY),
    ]:
        with pytest.raises(FileToolError) as caught:
            await write_file(root, path, "x", LIMITS)
        assert caught.value.reason is failure
    with pytest.raises(FileToolError) as caught:
        await write_file(root, "big.txt", "x" * 11, FileLimits(write_max_bytes=10))
    assert caught.value.reason is FileToolFailure.TOO_LARGE
