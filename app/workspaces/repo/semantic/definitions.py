"""Checks 3 and 4, within one file: a def or class defined twice in one scope (both branches
added the same helper, git kept both hunks), and one module-level name imported from two
sources. Only statements directly in the module (or class) body count: definitions and
imports under `if`/`try` are alternatives (`if TYPE_CHECKING`, `except ImportError`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from app.workspaces.repo.semantic.model import Finding, SemanticCheck, SemanticIssue
from app.workspaces.repo.semantic.modules import Module
from app.workspaces.repo.semantic.resolve import decorator_name
from app.workspaces.repo.semantic.scopes import Definition

# Decorators that define a name again on purpose: overloads, property accessors, and
# singledispatch registrations (`@f.register def _(...)`).
_REDEFINING = frozenset({"overload", "setter", "getter", "deleter", "register"})


def duplicate_definitions(module: Module) -> Iterator[Finding]:
    """The second (third, ...) def or class of a name in the module body or directly in a
    top-level class body, each naming the line of the first."""
    yield from _duplicates(module, module.tree.body, prefix="")
    for statement in module.tree.body:
        if isinstance(statement, ast.ClassDef):
            yield from _duplicates(module, statement.body, prefix=f"{statement.name}.")


def _duplicates(module: Module, body: list[ast.stmt], prefix: str) -> Iterator[Finding]:
    first: dict[str, Definition] = {}
    for statement in body:
        if not isinstance(statement, Definition):
            continue
        if any(_redefines(d, statement.name) for d in statement.decorator_list):
            continue
        earlier = first.setdefault(statement.name, statement)
        if earlier is not statement:
            name = prefix + statement.name
            message = (
                f"`{name}` is defined again here; the definition on line {earlier.lineno} "
                "is replaced by this one"
            )
            issue = SemanticIssue(
                SemanticCheck.DUPLICATE_DEFINITION, module.path, statement.lineno, name, message
            )
            yield Finding(issue, "")


def _redefines(decorator: ast.expr, name: str) -> bool:
    """`@overload`, `@x.setter` and the like, and any `@name.anything` over a def of that
    name: a descriptor's own way to add an accessor (`@__doc__.classlevel`)."""
    if decorator_name(decorator) in _REDEFINING:
        return True
    return (
        isinstance(decorator, ast.Attribute)
        and isinstance(decorator.value, ast.Name)
        and decorator.value.id == name
    )


def conflicting_imports(module: Module) -> Iterator[Finding]:
    """Module-level imports that bind one name to two different things (`from a import x`
    and `from b import x`; `import x` and `from y import x`). The same source twice, or
    `import a.b` beside `import a.c` (both bind `a`), is no conflict."""
    first: dict[str, tuple[str, int]] = {}
    reported: set[tuple[str, str]] = set()
    for statement in module.tree.body:
        if not isinstance(statement, ast.Import | ast.ImportFrom):
            continue
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            continue
        for alias in statement.names:
            if alias.name == "*":
                continue
            name = alias.asname or alias.name.partition(".")[0]
            source = module.import_source(statement, alias)
            earlier, line = first.setdefault(name, (source, statement.lineno))
            if earlier == source or (name, source) in reported:
                continue
            reported.add((name, source))
            message = (
                f"`{name}` is imported from `{source}` here and from `{earlier}` on line {line};"
                " the later import wins"
            )
            issue = SemanticIssue(
                SemanticCheck.CONFLICTING_IMPORT, module.path, statement.lineno, name, message
            )
            yield Finding(issue, f"{earlier}|{source}")
