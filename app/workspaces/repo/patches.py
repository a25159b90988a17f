"""Applying a unified diff to a worktree with `git apply`, once every path it names is
confined to the worktree. Git refuses `..` and paths beyond a symbolic link itself; the
check here comes first so the agent gets the same refusal as from the other file tools.

Hunk line counts are trusted (no `--recount`): the paths are read with the same counts
git uses, so a removed line that reads `--- x` inside a hunk is never taken for a file
header, here or by git. Applying the same patch twice is not an error: the second time
finds it applied (it reverses cleanly) and reports nothing changed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from app.workspaces.repo.errors import PatchFailure, PatchRejected, PathRefused
from app.workspaces.repo.git import GitRunner
from app.workspaces.repo.paths import confine, relative
from app.workspaces.repo.repository import parse_numstat

HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000\s*$", re.MULTILINE)
NAMED = ("rename from ", "rename to ", "copy from ", "copy to ")
ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class PatchResult:
    files: tuple[str, ...]  # every path the patch touches, relative to the worktree
    changed: bool  # False: the patch was applied already, nothing was written


async def apply_patch(git: GitRunner, root: Path, patch: str, *, max_bytes: int) -> PatchResult:
    data = patch.encode()
    if len(data) > max_bytes:
        raise PatchRejected(PatchFailure.DOES_NOT_APPLY, f"over {max_bytes} bytes")
    if SYMLINK_MODE.search(patch):
        raise PatchRejected(PatchFailure.SYMLINK, "the patch creates a symbolic link")
    names = patch_paths(patch)
    listed = await git.run("apply", "--numstat", "-z", "-", cwd=root, input_bytes=data, check=False)
    if listed.returncode != 0:
        failure = PatchFailure.DOES_NOT_APPLY if names else PatchFailure.EMPTY
        raise PatchRejected(failure, listed.stderr.strip())
    for stat in parse_numstat(listed.stdout):
        names += [stat.path, *([stat.old_path] if stat.old_path else [])]
    if not names:
        raise PatchRejected(PatchFailure.EMPTY, "no file changes found")
    try:
        files = sorted({relative(root, confine(root, name)) for name in names})
    except PathRefused as refused:
        raise PatchRejected(PatchFailure.UNSAFE_PATH, str(refused)) from None
    check = await git.run("apply", "--check", "-", cwd=root, input_bytes=data, check=False)
    if check.returncode != 0:
        undo = await git.run(
            "apply", "--check", "--reverse", "-", cwd=root, input_bytes=data, check=False
        )
        if undo.returncode == 0:
            return PatchResult(tuple(files), changed=False)
        raise PatchRejected(PatchFailure.DOES_NOT_APPLY, check.stderr.strip())
    await git.run("apply", "--whitespace=nowarn", "-", cwd=root, input_bytes=data)
    return PatchResult(tuple(files), changed=True)


def patch_paths(patch: str) -> list[str]:
    """The paths in a patch's file headers (`---`, `+++`, rename and copy lines), with
    git's default one leading component (`a/`, `b/`) stripped from `---`/`+++` names."""
    paths: list[str] = []
    old_left = new_left = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag != "\\":  # a short hunk: git will refuse it; read on as headers
                old_left = new_left = 0
            continue
        hunk = HUNK.match(line)
        if hunk:
            old_left = int(hunk.group(1) or 1)
            new_left = int(hunk.group(2) or 1)
        elif line.startswith(("--- ", "+++ ")):
            name = _header_name(line[4:])
            if name is not None:
                paths.append(name)
        elif line.startswith(NAMED):
            paths.append(_unquote(line.split(" ", 2)[2]))
    return paths


def _header_name(value: str) -> str | None:
    name = _unquote(value) if value.startswith('"') else value.split("\t", 1)[0].rstrip()
    if name == "/dev/null":
        return None
    return name.split("/", 1)[1] if "/" in name else name


def _unquote(value: str) -> str:
    """A name as git writes one with unusual characters: `"a/t\\303\\251st"`."""
    if not value.startswith('"'):
        return value
    out = bytearray()
    index = 1
    while index < len(value) and value[index] != '"':
        char = value[index]
        if char == "\\" and index + 1 < len(value):
            following = value[index + 1]
            if following in "01234567":
                out.append(int(value[index + 1 : index + 4], 8) & 0xFF)
                index += 4
                continue
            out.append(ESCAPES.get(following, ord(following)))
            index += 2
            continue
        out += char.encode()
        index += 1
    return out.decode(errors="replace")
