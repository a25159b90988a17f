"""`analyse_merge`: the four checks over the files a merge touched and the files that
reach them, on both sides of the merge; what the merged side shows and the base side did
not is what the merge made.

Which files are needed: the Python files the merge changed (added, modified, deleted);
the modules they import; and, for a changed module that lost or changed a name importers
may use, the unchanged files whose text spells an import of it. An issue needs a change
at one end of it (the use or the definition), so no other file can hold one. Files past
`max_files` in that order, or over `max_file_bytes`, are skipped and said so."""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.workspaces.semantic.calls import broken_calls
from app.workspaces.semantic.definitions import conflicting_imports, duplicate_definitions
from app.workspaces.semantic.model import (
    Finding,
    SemanticCheck,
    SemanticConfig,
    SemanticIssue,
    SemanticReport,
    SkippedFile,
    SkipReason,
)
from app.workspaces.semantic.modules import Module, Tree, build_module, module_names
from app.workspaces.semantic.references import missing_references
from app.workspaces.semantic.resolve import ModuleTarget, Resolver

Sources = Mapping[str, str]  # repository-relative POSIX path -> file text


class _Parsed:
    """Parses each (path, text) once: an unchanged file is the same on both sides."""

    def __init__(self, config: SemanticConfig) -> None:
        self.config = config
        self.cache: dict[tuple[str, str], Module | SkippedFile] = {}

    def __call__(self, path: str, source: str) -> Module | SkippedFile:
        key = (path, source)
        if key not in self.cache:
            self.cache[key] = self._parse(path, source)
        return self.cache[key]

    def _parse(self, path: str, source: str) -> Module | SkippedFile:
        try:
            return build_module(path, source, self.config.source_roots)
        except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
            line = getattr(exc, "lineno", None)
            reason = getattr(exc, "msg", None) or str(exc)
            detail = f"line {line}: {reason}" if line else reason
            return SkippedFile(path, SkipReason.SYNTAX_ERROR, detail)
        except (RecursionError, MemoryError):
            return SkippedFile(path, SkipReason.TOO_DEEP, "nested too deep to analyse")


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
    parse = _Parsed(config)
    sides = (
        (before, Tree(before, config.source_roots)),
        (after, Tree(after, config.source_roots)),
    )
    (_, before_tree), (_, after_tree) = sides
    skipped: list[SkippedFile] = []
    chosen = _choose(sides, config, parse, skipped)
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


def _choose(
    sides: tuple[tuple[Sources, Tree], ...],
    config: SemanticConfig,
    parse: _Parsed,
    skipped: list[SkippedFile],
) -> list[str]:
    """The files the checks need, in order (changed, imported by them, maybe using them),
    within the limits; the others needed are added to `skipped`."""
    (before, _), (after, _) = sides
    paths = sorted(p for p in before.keys() | after.keys() if p.endswith(".py"))
    changed = [p for p in paths if before.get(p) != after.get(p)]
    sizes_checked: dict[str, bool] = {}

    def fits(path: str) -> bool:
        if path not in sizes_checked:
            size = max(_size(s[path]) for s in (before, after) if path in s)
            sizes_checked[path] = size <= config.max_file_bytes
            if size > config.max_file_bytes:
                detail = f"{size} bytes, the limit is {config.max_file_bytes}"
                skipped.append(SkippedFile(path, SkipReason.TOO_LARGE, detail))
        return sizes_checked[path]

    needed = [p for p in changed if fits(p)]
    needed += _imported_by(needed[: config.max_files], sides, parse)
    reshaped = [p for p in changed if _interface_changed(p, before, after, parse)]
    needed += _users_of(reshaped, paths, after, config)
    chosen: list[str] = []
    for path in dict.fromkeys(needed):
        if not fits(path):
            continue
        if len(chosen) < config.max_files:
            chosen.append(path)
        else:
            detail = f"more than {config.max_files} files needed"
            skipped.append(SkippedFile(path, SkipReason.TOO_MANY_FILES, detail))
    return chosen


def _parse_both_sides(
    chosen: list[str],
    sides: tuple[tuple[Sources, Tree], ...],
    parse: _Parsed,
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


def _base_syntax_errors(chosen: list[str], before: Sources, parse: _Parsed) -> list[Finding]:
    """A file that did not parse before the merge either is no new syntax error after it."""
    found = []
    for path in chosen:
        if path in before:
            outcome = parse(path, before[path])
            if isinstance(outcome, SkippedFile) and outcome.reason is SkipReason.SYNTAX_ERROR:
                found.append(_syntax_issue(outcome))
    return found


def _size(source: str) -> int:
    return len(source.encode("utf-8", "surrogatepass"))


def _interface_changed(path: str, before: Sources, after: Sources, parse: _Parsed) -> bool:
    """Whether a changed module lost or changed a name its importers may use (a module
    that only gained names or changed bodies cannot break them). Unknown counts as yes."""
    if path not in before:
        return False  # added: nobody imported it before
    if path not in after:
        return True
    old, new = parse(path, before[path]), parse(path, after[path])
    if not isinstance(old, Module) or not isinstance(new, Module):
        return True
    now = new.interface()
    return any(now.get(name) != shape for name, shape in old.interface().items())


def _imported_by(
    paths: list[str], sides: Iterable[tuple[Sources, Tree]], parse: _Parsed
) -> list[str]:
    """The files of the modules that `paths` import, on either side of the merge."""
    found: dict[str, None] = {}
    given = set(paths)
    for sources, tree in sides:
        for path in paths:
            module = parse(path, sources[path]) if path in sources else None
            if not isinstance(module, Module):
                continue
            for name in _imports(module):
                target = tree.paths.get(name)
                if target is not None and target not in given:
                    found[target] = None
    return sorted(found)


def _imports(module: Module) -> Iterable[str]:
    for node in module.imports:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        else:
            source = module.absolute(node.module, node.level)
            if source is not None:
                yield source
                yield from (f"{source}.{alias.name}" for alias in node.names)


def _users_of(
    changed: list[str], paths: list[str], sources: Sources, config: SemanticConfig
) -> list[str]:
    """The unchanged files that may import a changed module: a textual filter that errs on
    the side of including. A file qualifies when it spells the module's last name and
    also its dotted name or its parent package's (absolute imports: `import a.b.c`, `from
    a.b import c`), or a relative import from inside the same top package. Under a changed
    package's folder, any relative import qualifies (`from . import x` names no package)."""
    reaches = [r for path in changed for r in _Reach.of(path, config.source_roots)]
    if not reaches:
        return []
    words = sorted({re.escape(r.word) for r in reaches})
    any_word = re.compile(r"\b(?:" + "|".join(words) + r")\b")
    changed_set = set(changed)
    found = []
    for path in paths:
        if path not in sources or path in changed_set:
            continue
        text = sources[path]
        relative = "from ." in text
        if relative and any(r.is_package and path.startswith(r.folder) for r in reaches):
            found.append(path)
            continue
        spelled = set(any_word.findall(text))
        if any(r.word in spelled and r.reaches(path, text, relative) for r in reaches):
            found.append(path)
    return found


@dataclass(frozen=True)
class _Reach:
    """How a file could import one name of a changed module (`a.b.c`)."""

    word: str  # `c`: every import of the module spells it
    dotted: re.Pattern[str]  # `a.b.c`, whole
    parent: re.Pattern[str] | None  # `a.b`; None for a top-level module
    top_folder: str  # where relative imports of it can come from
    folder: str  # a package's own folder
    is_package: bool

    @classmethod
    def of(cls, path: str, source_roots: Sequence[str]) -> list[_Reach]:
        names, is_package = module_names(path, source_roots)
        found = []
        for name in names:
            parent, _, word = name.rpartition(".")
            # the folder of the name's first part: a package's folders end with its name's
            # parts, a module's with all but the last (its file)
            folders = path.split("/")[:-1]
            parts = name.count(".") + 1
            top = folders[: len(folders) - parts + (1 if is_package else 2)]
            found.append(
                cls(
                    word,
                    _dotted(name),
                    _dotted(parent) if parent else None,
                    "/".join(top) + "/" if top else "",
                    path.removesuffix("__init__.py"),
                    is_package,
                )
            )
        return found

    def reaches(self, path: str, text: str, relative: bool) -> bool:
        """Given that `text` spells `word`: may the file import the module?"""
        if self.parent is None or self.dotted.search(text) or self.parent.search(text):
            return True
        return relative and path.startswith(self.top_folder)


def _dotted(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(name) + r"(?!\w)")
