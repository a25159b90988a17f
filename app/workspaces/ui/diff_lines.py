"""A diff and a conflict hunk as lines for the page, each with the CSS class that colours
it (the page's policy allows no inline style): a unified diff's file headers, hunk
headers, added and removed lines; a diff3 conflict's markers and its three sides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DiffLine(StrEnum):
    FILE = "d-file"  # `diff --git`, `index`, `---`/`+++`, modes, renames, binary notes
    HUNK = "d-hunk"  # `@@ -a,b +c,d @@`
    ADDED = "d-add"
    REMOVED = "d-del"
    CONTEXT = "d-ctx"  # unchanged, and `\ No newline at end of file`


class ConflictLine(StrEnum):
    MARKER = "c-marker"  # `<<<<<<<`, `|||||||`, `=======`, `>>>>>>>`
    BASE = "c-base"  # the base branch's side (the rebase's upstream)
    ANCESTOR = "c-ancestor"  # the common ancestor's text (diff3)
    TASK = "c-task"  # the task's side (its commit being laid on the base)


@dataclass(frozen=True)
class Line:
    kind: str
    text: str


def diff_lines(text: str) -> list[Line]:
    """Lines of `git diff`: inside a hunk a line's first character says what it is (so a
    removed `-- x` is not taken for a `---` header); between files, all is header."""
    lines: list[Line] = []
    in_hunk = False
    for line in text.splitlines():
        if line.startswith("diff --git "):
            in_hunk = False
            lines.append(Line(DiffLine.FILE, line))
        elif line.startswith("@@"):
            in_hunk = True
            lines.append(Line(DiffLine.HUNK, line))
        elif not in_hunk:
            lines.append(Line(DiffLine.FILE, line))
        elif line.startswith("+"):
            lines.append(Line(DiffLine.ADDED, line))
        elif line.startswith("-"):
            lines.append(Line(DiffLine.REMOVED, line))
        else:
            lines.append(Line(DiffLine.CONTEXT, line))
    return lines


_SIDES = {
    "<<<<<<<": ConflictLine.BASE,
    "|||||||": ConflictLine.ANCESTOR,
    "=======": ConflictLine.TASK,
    ">>>>>>>": None,
}


def conflict_lines(hunk: str) -> list[Line]:
    """A conflict-marked hunk: each marker, then its side's lines."""
    lines: list[Line] = []
    side: ConflictLine | None = None
    for line in hunk.splitlines():
        marker = line[:7]
        if marker in _SIDES and line[7:8] in ("", " "):
            side = _SIDES[marker]
            lines.append(Line(ConflictLine.MARKER, line))
        else:
            lines.append(Line(side or "", line))  # none outside a block
    return lines
