"""The semantic checks of a merge (`app.workspaces.repo.semantic`) on the repository's Python
files: the base branch before the merge, and after it (the rebased branch's tip, which
the base becomes). Their answer in the API's shapes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.core.vocabulary import SemanticCheck
from app.workspaces.repo.repository import Repository
from app.workspaces.repo.semantic.analysis import analyse_merge
from app.workspaces.repo.semantic.model import SemanticConfig
from app.workspaces.repo.sources import python_paths, python_sources
from app.workspaces.schemas import SemanticIssue

MAX_FILES_READ = 5_000  # a side's Python files read at most; the checks pick among them


@dataclass(frozen=True)
class Found:
    issues: list[SemanticIssue]
    skipped: list[str]  # "path: why"


class SemanticReview:
    def __init__(self, config: SemanticConfig | None = None) -> None:
        self._config = config or SemanticConfig()

    async def review(
        self, repo: Repository, base_before: str, head: str, branch_point: str
    ) -> Found:
        limit = self._config.max_file_bytes
        before = await python_sources(
            repo, base_before, max_files=MAX_FILES_READ, max_file_bytes=limit
        )
        after = await python_sources(repo, head, max_files=MAX_FILES_READ, max_file_bytes=limit)
        earlier = await python_paths(repo, branch_point)
        report = await asyncio.to_thread(
            analyse_merge, before.sources, after.sources, self._config, earlier_paths=earlier
        )
        issues = [
            SemanticIssue(
                check=SemanticCheck(i.check.value),
                path=i.path,
                line=i.line,
                name=i.name,
                message=i.message,
            )
            for i in report.issues
        ]
        skipped = [
            f"{s.path}: {s.reason.value}" + (f" ({s.detail})" if s.detail else "")
            for s in report.skipped
        ]
        skipped += [f"{path}: too_large" for path in after.too_large]
        if after.dropped:
            skipped.append(f"{after.dropped} files: too_many_files")
        return Found(issues, skipped)
