"""Confining a path an agent gives to its worktree. The rules are plain so an agent can
learn them from one refusal: relative paths only, no `..` anywhere (even one that would
stay inside), nothing under `.git`, and no symbolic link along the way that leads out.

What this cannot stop: a link created between the check and the use (by a command the
agent runs at the same moment). The file tools open what `confine` returned; the commands
run with the user's rights anyway, so the allowlist is the boundary there."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from app.workspaces.repo.errors import PathRefusal, PathRefused

GIT_ENTRY = ".git"


def confine(root: Path, path: str, *, allow_root: bool = False) -> Path:
    """The real path that `path` names inside `root`, or PathRefused. `""` and `"."`
    name the root itself only with `allow_root` (listing or searching a whole worktree)."""
    root = Path(os.path.realpath(root))
    if "\0" in path:
        raise PathRefused(PathRefusal.NUL_BYTE, path)
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise PathRefused(PathRefusal.ABSOLUTE, path)
    parts = pure.parts
    if not parts:
        if allow_root:
            return root
        raise PathRefused(PathRefusal.EMPTY, path)
    if ".." in parts:
        raise PathRefused(PathRefusal.TRAVERSAL, path)
    if _names_git(parts):
        raise PathRefused(PathRefusal.GIT_DIR, path)
    current = root
    for part in parts:
        current = current / part
        if os.path.islink(current):
            # Resolved whole (a link to a link), then judged by where it lands.
            current = Path(os.path.realpath(current))
            if not current.is_relative_to(root):
                raise PathRefused(PathRefusal.SYMLINK_ESCAPE, path)
            if _names_git(current.relative_to(root).parts):
                raise PathRefused(PathRefusal.GIT_DIR, path)
    return current


def relative(root: Path, path: Path) -> str:
    """A confined path as the tools report it: relative to the root, `/`-separated."""
    return path.relative_to(os.path.realpath(root)).as_posix() or "."


def _names_git(parts: tuple[str, ...]) -> bool:
    # Case-insensitively: on a case-insensitive file system `.GIT` is the same entry.
    return any(part.lower() == GIT_ENTRY for part in parts)
