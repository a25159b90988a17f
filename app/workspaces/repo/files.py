"""The file tools' work inside a worktree: read, list, search and write, every path
confined (paths.py), every answer capped (FileLimits). The file system is used in a
worker thread: the event loop never waits on a disk. `.git` is never listed, searched or
written."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from app.workspaces.repo.errors import FileToolError, FileToolFailure
from app.workspaces.repo.paths import GIT_ENTRY, confine, relative

BINARY_SNIFF_BYTES = 8_000  # git's own test: a NUL in the first 8000 bytes means binary


@dataclass(frozen=True)
class FileLimits:
    read_max_bytes: int = 256_000  # more is cut (`truncated`)
    write_max_bytes: int = 1_000_000  # more is refused (TOO_LARGE)
    list_max_entries: int = 1_000
    search_max_matches: int = 200
    search_max_file_bytes: int = 1_000_000  # larger files are skipped
    search_max_files: int = 10_000  # files opened by one search
    search_max_line_chars: int = 500  # a matching line is cut to this in the answer


@dataclass(frozen=True)
class FileContent:
    path: str
    size: int  # bytes on disk
    text: str | None  # None for a binary file
    binary: bool
    truncated: bool  # only the first read_max_bytes were read


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"  # listed, never followed
    OTHER = "other"  # a fifo, a socket, a device


@dataclass(frozen=True)
class Entry:
    path: str
    kind: EntryKind
    size: int | None  # files only


@dataclass(frozen=True)
class Listing:
    entries: tuple[Entry, ...]
    truncated: bool  # more than list_max_entries


@dataclass(frozen=True)
class SearchMatch:
    path: str
    line: int  # 1-based
    text: str  # the line, cut to search_max_line_chars


@dataclass(frozen=True)
class SearchResult:
    matches: tuple[SearchMatch, ...]
    truncated: bool  # stopped at search_max_matches or search_max_files
    files_searched: int
    files_skipped: int  # binary or over search_max_file_bytes


@dataclass(frozen=True)
class WriteResult:
    path: str
    changed: bool  # False: the file held this content already, nothing was written
    created: bool
    size: int


async def read_file(root: Path, path: str, limits: FileLimits) -> FileContent:
    return await asyncio.to_thread(_read, root, path, limits)


async def list_files(
    root: Path, path: str = ".", *, recursive: bool = False, limits: FileLimits
) -> Listing:
    return await asyncio.to_thread(_list, root, path, recursive, limits)


async def search(
    root: Path,
    pattern: str,
    path: str = ".",
    *,
    regex: bool = False,
    ignore_case: bool = False,
    limits: FileLimits,
) -> SearchResult:
    return await asyncio.to_thread(_search, root, pattern, path, regex, ignore_case, limits)


async def write_file(root: Path, path: str, content: str, limits: FileLimits) -> WriteResult:
    return await asyncio.to_thread(_write, root, path, content, limits)


def _read(root: Path, path: str, limits: FileLimits) -> FileContent:
    target = confine(root, path)
    _require_file(target, path)
    size = target.stat().st_size
    with target.open("rb") as file:
        data = file.read(limits.read_max_bytes)
    truncated = size > len(data)
    text = _text(data, final=not truncated)
    return FileContent(relative(root, target), size, text, text is None, truncated)


def _text(data: bytes, *, final: bool) -> str | None:
    """UTF-8 text, or None for binary. A cut read may end inside a character: the
    incremental decoder leaves that tail out instead of calling the file binary."""
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return None


def _list(root: Path, path: str, recursive: bool, limits: FileLimits) -> Listing:
    top = confine(root, path, allow_root=True)
    _require_directory(top, path)
    entries: list[Entry] = []
    for entry in _walk(top, recursive):
        if len(entries) >= limits.list_max_entries:
            return Listing(tuple(entries), truncated=True)
        kind = _kind(entry)
        size = entry.stat(follow_symlinks=False).st_size if kind is EntryKind.FILE else None
        entries.append(Entry(relative(root, Path(entry.path)), kind, size))
    return Listing(tuple(entries), truncated=False)


def _walk(top: Path, recursive: bool) -> Iterator[os.DirEntry[str]]:
    """Entries in name order, depth first, `.git` left out, links not followed."""
    with os.scandir(top) as scan:
        entries = sorted((e for e in scan if e.name.lower() != GIT_ENTRY), key=lambda e: e.name)
    for entry in entries:
        yield entry
        if recursive and entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), recursive)


def _kind(entry: os.DirEntry[str]) -> EntryKind:
    if entry.is_symlink():
        return EntryKind.SYMLINK
    if entry.is_dir(follow_symlinks=False):
        return EntryKind.DIRECTORY
    if entry.is_file(follow_symlinks=False):
        return EntryKind.FILE
    return EntryKind.OTHER


def _search(
    root: Path, pattern: str, path: str, regex: bool, ignore_case: bool, limits: FileLimits
) -> SearchResult:
    # A regex is Python's `re`; one line of a file is matched at a time. A pattern that
    # backtracks badly on a long line is not stopped: the caps bound the lines, not time.
    try:
        compiled = re.compile(
            pattern if regex else re.escape(pattern), re.IGNORECASE if ignore_case else 0
        )
    except re.error as error:
        raise FileToolError(FileToolFailure.INVALID_PATTERN, pattern, str(error)) from None
    top = confine(root, path, allow_root=True)
    if not top.is_dir():
        _require_file(top, path)
    files = (
        [top]
        if top.is_file()
        else (Path(e.path) for e in _walk(top, True) if _kind(e) is EntryKind.FILE)
    )
    matches: list[SearchMatch] = []
    searched = skipped = 0
    for file in files:
        if searched >= limits.search_max_files:
            return SearchResult(tuple(matches), True, searched, skipped)
        if file.stat().st_size > limits.search_max_file_bytes:
            skipped += 1
            continue
        data = file.read_bytes()
        searched += 1
        if b"\0" in data[:BINARY_SNIFF_BYTES]:
            skipped += 1
            continue
        for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
            if compiled.search(line):
                if len(matches) >= limits.search_max_matches:
                    return SearchResult(tuple(matches), True, searched, skipped)
                cut = line[: limits.search_max_line_chars]
                matches.append(SearchMatch(relative(root, file), number, cut))
    return SearchResult(tuple(matches), False, searched, skipped)


def _write(root: Path, path: str, content: str, limits: FileLimits) -> WriteResult:
    target = confine(root, path)
    data = content.encode()
    if len(data) > limits.write_max_bytes:
        raise FileToolError(
            FileToolFailure.TOO_LARGE, path, f"{len(data)} bytes, at most {limits.write_max_bytes}"
        )
    created = not target.exists()
    if not created:
        _require_file(target, path)
        # The same content again (a replayed tool call) writes nothing: same bytes, same
        # modification time, no change for git to see.
        if target.stat().st_size == len(data) and target.read_bytes() == data:
            return WriteResult(relative(root, target), False, False, len(data))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise FileToolError(FileToolFailure.NOT_A_DIRECTORY, path, "a parent is a file") from None
    mode = 0o644 if created else target.stat().st_mode & 0o7777
    # Written beside the target and renamed over it: a reader (or a crash) sees the old
    # file or the new one, never a part.
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return WriteResult(relative(root, target), True, created, len(data))


def _require_file(target: Path, path: str) -> None:
    if not target.exists():
        raise FileToolError(FileToolFailure.NOT_FOUND, path)
    if not target.is_file():
        raise FileToolError(FileToolFailure.NOT_A_FILE, path)


def _require_directory(target: Path, path: str) -> None:
    if not target.exists():
        raise FileToolError(FileToolFailure.NOT_FOUND, path)
    if not target.is_dir():
        raise FileToolError(FileToolFailure.NOT_A_DIRECTORY, path)
