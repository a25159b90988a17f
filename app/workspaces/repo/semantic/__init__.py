"""Semantic conflict checks: after a textually clean merge, what the merge broke
in the Python files it touched, found from their syntax trees alone (no git, no imports
run). `analyse_merge(before, after)` is the entry point; see `analysis` for which files
it reads and `model` for what it returns."""

from app.workspaces.repo.semantic.analysis import analyse_merge
from app.workspaces.repo.semantic.model import (
    SemanticCheck,
    SemanticConfig,
    SemanticIssue,
    SemanticReport,
    SkippedFile,
    SkipReason,
)
from app.workspaces.repo.semantic.selection import Sources

__all__ = [
    "SemanticCheck",
    "SemanticConfig",
    "SemanticIssue",
    "SemanticReport",
    "SkipReason",
    "SkippedFile",
    "Sources",
    "analyse_merge",
]
