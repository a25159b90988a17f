"""Which files a merge's semantic checks read, and parsing each once: the Python files
the merge changed (added, modified, deleted); the modules they import; and, for a changed
module that lost or changed a name importers may use, the unchanged files whose text
spells an import of it. An issue needs a change at one end of it (the use or the
definition), so no other file can hold one. Files past `max_files` in that order, or
over `max_file_bytes`, are skipped and said so."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.workspaces.repo.semantic.model import SemanticConfig, SkippedFile, SkipReason
from app.workspaces.repo.semantic.modules import Module, Tree, build_module, module_names

Sources = Mapping[str, str]  # repository-relative POSIX path -> file text


class Parser:
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


def choose(
    sides: tuple[tuple[Sources, Tree], ...],
    config: SemanticConfig,
    parse: Parser,
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


def _size(source: str) -> int:
    return len(source.encode("utf-8", "surrogatepass"))


def _interface_changed(path: str, before: Sources, after: Sources, parse: Parser) -> bool:
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
    paths: list[str], sides: Iterable[tuple[Sources, Tree]], parse: Parser
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
