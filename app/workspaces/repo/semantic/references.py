"""Check 1, missing references: names a module imports, reads or reaches through another
module that are not there (a function renamed on one branch, still used on the other).
Only definite absences count: an unknown, open or unparsed module defines anything."""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator, Mapping

from app.workspaces.repo.semantic.model import Finding, SemanticCheck, SemanticIssue
from app.workspaces.repo.semantic.modules import Module, Tree
from app.workspaces.repo.semantic.resolve import ModuleTarget, Resolver

# and the names type checkers or other platforms provide
_BUILTINS = frozenset(dir(builtins)) | {"reveal_type", "reveal_locals", "WindowsError"}


def missing_references(
    module: Module, tree: Tree, resolver: Resolver, gone: Mapping[str, str]
) -> list[Finding]:
    """The missing references in one module of `tree`. `gone` maps the modules the merge
    removed to their old paths, so that an import of one is named as such."""
    return [
        *_undefined_globals(module),
        *_missing_imports(module, tree, gone),
        *_missing_attributes(module, tree, resolver),
    ]


def _is_dunder(name: str) -> bool:
    """`__name__`, `__file__`, `__path__`, `__doc__`, `__class__`: every module (or method)
    has them without a statement that binds them."""
    return name.startswith("__") and name.endswith("__")


def _finding(module: Module, line: int, name: str, message: str, anchor: str) -> Finding:
    issue = SemanticIssue(SemanticCheck.MISSING_REFERENCE, module.path, line, name, message)
    return Finding(issue, anchor)


def _undefined_globals(module: Module) -> Iterator[Finding]:
    """Global reads of names the module neither binds nor imports; one per name."""
    if module.is_open:
        return
    reported: set[str] = set()
    for node in module.global_reads:
        name = node.id
        if name in reported or name in module.bindings or name in _BUILTINS or _is_dunder(name):
            continue
        reported.add(name)
        message = f"`{name}` is used here but this module neither defines nor imports it"
        yield _finding(module, node.lineno, name, message, "")


def _missing_imports(module: Module, tree: Tree, gone: Mapping[str, str]) -> Iterator[Finding]:
    """Imports of modules the merge removed, and `from m import x` where `m` is in the
    tree, parsed, and binds no `x` (nor has a submodule `x`). Imports guarded by
    `except ImportError` are alternatives, not mistakes."""
    for node in module.imports:
        if id(node) in module.guarded_imports:
            continue
        text = module.text(node.lineno)
        if isinstance(node, ast.Import):
            for alias in node.names:
                removed = _removed(alias.name, gone)
                if removed is not None:
                    message = f"module `{removed}` ({gone[removed]}) no longer exists"
                    yield _finding(module, node.lineno, removed, message, text)
            continue
        source = module.absolute(node.module, node.level)
        if source is None:
            continue
        removed = _removed(source, gone)
        if removed is not None:
            message = f"module `{removed}` ({gone[removed]}) no longer exists"
            yield _finding(module, node.lineno, removed, message, text)
            continue
        for alias in node.names:
            if alias.name == "*" or _is_dunder(alias.name):
                continue
            if tree.defines(source, alias.name) is False:
                where = tree.paths[source]
                message = f"`{source}` ({where}) does not define `{alias.name}`"
                yield _finding(module, node.lineno, f"{source}.{alias.name}", message, text)


def _removed(dotted: str, gone: Mapping[str, str]) -> str | None:
    """The shortest prefix of `dotted` (`a`, `a.b`, ...) that the merge removed."""
    parts = dotted.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix in gone:
            return prefix
    return None


def _missing_attributes(module: Module, tree: Tree, resolver: Resolver) -> Iterator[Finding]:
    """`mod.x` read through an imported module that binds no `x`. Attributes written
    (`mod.x = ...`) are left alone, and so are attributes of anything but a module."""
    for node in module.attributes:
        if not isinstance(node.ctx, ast.Load):
            continue
        if _is_dunder(node.attr):
            continue
        base = resolver.expression(node.value, module)
        if isinstance(base, ModuleTarget) and tree.defines(base.name, node.attr) is False:
            where = tree.paths[base.name]
            message = (
                f"`{ast.unparse(node)}`: `{base.name}` ({where}) does not define `{node.attr}`"
            )
            name = f"{base.name}.{node.attr}"
            yield _finding(module, node.lineno, name, message, module.text(node.lineno))
