"""`analyse_merge`: the four checks over the files a merge touched and the files that
reach them, on both sides of the merge; what the merged side shows and the base side did
not is what the merge made.

Which files are read is `selection`'s job; files past the limits are skipped and said
so."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from app.workspaces.repo.semantic.calls import broken_calls
from app.workspaces.repo.semantic.definitions import conflicting_imports, duplicate_definitions
from app.workspaces.repo.semantic.model import (
    Finding,
    SemanticCheck,
    SemanticConfig,
    SemanticIssue,
    SemanticReport,
    SkippedFile,
    SkipReason,
)
from app.workspaces.repo.semantic.modules import Module, Tree
from app.workspaces.repo.semantic.references import missing_references
from app.workspaces.repo.semantic.resolve import ModuleTarget, Resolver
from app.workspaces.repo.semantic.selection import Parser, Sources, choose


def analyse_merge(
    before: Sources,
    after: Sources,
    config: SemanticConfig | None = None,
    *,
    earlier_paths: Iterable[str] = (),
) -> SemanticReport:
    """The semantic conflicts a merge made. `before` and `after` hold the Python files of
    the base branch before and after the merge (path -> text; ideally all of them, at least
    the changed ones and the ones that import them): a path missing on one side did not
    exist there. Files not given are unknown modules, of which nothing is reported.

    `earlier_paths` (optional) lists the Python paths of the branch's own head or its
    branch point: a module there that the merged tree lacks was removed by the other side,
    so an import of it is reported (without them it looks like a third-party module)."""
    config = config or SemanticConfig()
    parse = Parser(config)
    sides = (
        (before, Tree(before, config.source_roots)),
        (after, Tree(after, config.source_roots)),
    )
    (_, before_tree), (_, after_tree) = sides
    skipped: list[SkippedFile] = []
    chosen = choose(sides, config, parse, skipped)
    syntax_errors = _parse_both_sides(chosen, sides, parse, skipped)

    earlier = Tree(earlier_paths, config.source_roots).paths
    gone = {n: p for n, p in {**earlier, **before_tree.paths}.items() if not after_tree.exists(n)}
    found = syntax_errors + _run_checks(after_tree, gone, skipped)
    baseline = Counter(f.key for f in _run_checks(before_tree, {}, []))
    baseline.update(f.key for f in _base_syntax_errors(chosen, before, parse))
    issues: list[SemanticIssue] = []
    for finding in found:
        if baseline[finding.key] > 0:
            baseline[finding.key] -= 1
        else:
            issues.append(finding.issue)
    issues.sort(key=lambda i: (i.path, i.line, i.check, i.name))
    analysed = tuple(p for p in chosen if p in after_tree.parsed)
    return SemanticReport(tuple(issues), tuple(skipped), analysed)


def _parse_both_sides(
    chosen: list[str],
    sides: tuple[tuple[Sources, Tree], ...],
    parse: Parser,
    skipped: list[SkippedFile],
) -> list[Finding]:
    """Parse the chosen files into their trees; a merged file that does not parse is an
    issue, one that did not parse on the base side has no baseline."""
    (before, before_tree), (after, after_tree) = sides
    syntax_errors: list[Finding] = []
    for path in chosen:
        old = parse(path, before[path]) if path in before else None
        new = parse(path, after[path]) if path in after else None
        for outcome, tree in ((old, before_tree), (new, after_tree)):
            if isinstance(outcome, Module):
                tree.parsed[path] = outcome
        if isinstance(new, SkippedFile):
            skipped.append(new)
            if new.reason is SkipReason.SYNTAX_ERROR:
                syntax_errors.append(_syntax_issue(new))
        elif isinstance(old, SkippedFile):
            reason = SkipReason.TOO_DEEP
            if old.reason is SkipReason.SYNTAX_ERROR:
                reason = SkipReason.BASE_SYNTAX_ERROR
            skipped.append(SkippedFile(path, reason, old.detail))
    return syntax_errors


def _run_checks(tree: Tree, gone: Mapping[str, str], skipped: list[SkippedFile]) -> list[Finding]:
    resolver = Resolver(tree)
    for module in tree.parsed.values():
        for node in module.attributes:  # `config.DEBUG = True` defines `DEBUG` for all readers
            if isinstance(node.ctx, ast.Store):
                target = resolver.expression(node.value, module)
                if isinstance(target, ModuleTarget):
                    tree.written.add((target.name, node.attr))
    found: list[Finding] = []
    for path, module in sorted(tree.parsed.items()):
        try:
            found += [
                *missing_references(module, tree, resolver, gone),
                *broken_calls(module, resolver),
                *duplicate_definitions(module),
                *conflicting_imports(module),
            ]
        except RecursionError:  # all of a file's findings or none, on both sides alike
            skipped.append(SkippedFile(path, SkipReason.TOO_DEEP, "nested too deep to analyse"))
    return found


def _syntax_issue(failure: SkippedFile) -> Finding:
    line = int(m.group(1)) if (m := re.match(r"line (\d+):", failure.detail)) else 1
    message = f"the merged file does not parse ({failure.detail})"
    issue = SemanticIssue(SemanticCheck.SYNTAX_ERROR, failure.path, line, "", message)
    return Finding(issue, "")


def _base_syntax_errors(chosen: list[str], before: Sources, parse: Parser) -> list[Finding]:
    """A file that did not parse before the merge either is no new syntax error after it."""
    found = []
    for path in chosen:
        if path in before:
            outcome = parse(path, before[path])
            if isinstance(outcome, SkippedFile) and outcome.reason is SkipReason.SYNTAX_ERROR:
                found.append(_syntax_issue(outcome))
    return found
