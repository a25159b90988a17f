"""The semantic checks' vocabulary: their configuration, the issues they report and the
files they could not read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SemanticCheck(StrEnum):
    MISSING_REFERENCE = "missing_reference"  # a name imported, read or called that is not there
    BROKEN_CALL = "broken_call"  # a call whose arguments do not fit the function's signature
    DUPLICATE_DEFINITION = "duplicate_definition"  # a second def/class of one name in one scope
    CONFLICTING_IMPORT = "conflicting_import"  # one module-level name imported from two sources
    SYNTAX_ERROR = "syntax_error"  # a merged file that does not parse


class SkipReason(StrEnum):
    TOO_LARGE = "too_large"  # over `max_file_bytes` on either side of the merge
    TOO_MANY_FILES = "too_many_files"  # past `max_files` among the files the checks needed
    SYNTAX_ERROR = "syntax_error"  # the merged file does not parse (also an issue)
    BASE_SYNTAX_ERROR = "base_syntax_error"  # the file did not parse before the merge, so its
    # issues have no baseline: all of them are reported
    TOO_DEEP = "too_deep"  # nested beyond the parser's or the checks' recursion limit


@dataclass(frozen=True)
class SemanticConfig:
    """Bounds on the analysis' cost, and where modules live. `source_roots` are folders
    whose files are imported without the folder's name (`src/pkg/mod.py` is `pkg.mod`)."""

    max_files: int = 200
    max_file_bytes: int = 256 * 1024
    source_roots: tuple[str, ...] = ("src",)

    def __post_init__(self) -> None:
        if self.max_files < 1 or self.max_file_bytes < 1:
            raise ValueError("need max_files >= 1 and max_file_bytes >= 1")


@dataclass(frozen=True)
class SemanticIssue:
    """One semantic conflict in the merged tree. `line` is 1-based in the merged file;
    `name` is what broke, qualified by its module where it lives elsewhere (`util.parse`)."""

    check: SemanticCheck
    path: str
    line: int
    name: str
    message: str


@dataclass(frozen=True)
class SkippedFile:
    """A file the checks needed but did not analyse, and why."""

    path: str
    reason: SkipReason
    detail: str = ""


@dataclass(frozen=True)
class SemanticReport:
    """What `analyse_merge` found: the issues the merge made (not those already on the base
    branch), the needed files left out, and the files analysed."""

    issues: tuple[SemanticIssue, ...]
    skipped: tuple[SkippedFile, ...]
    analysed: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """No issue found. Skipped files do not count: the caller decides what they mean."""
        return not self.issues


@dataclass(frozen=True)
class Finding:
    """An issue as a check returns it, with the `anchor` that identifies its occurrence
    across line shifts (the stripped source line, or "" where one per path and name is
    meant): the same finding on the base side means the merge did not make it."""

    issue: SemanticIssue
    anchor: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.issue.check, self.issue.path, self.issue.name, self.anchor)
