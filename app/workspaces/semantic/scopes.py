"""The part of Python's scoping rules the semantic checks need: which names a scope's own
statements bind, and which name reads in a module reach its global scope."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Binding:
    """What binds a name: a def or class, one name of an import statement (`alias`), or
    any other node that assigns it (`x = ...`, `for x in`, `except E as x`, ...)."""

    node: ast.AST
    alias: ast.alias | None = None

    @property
    def definition(self) -> Definition | None:
        return self.node if isinstance(self.node, Definition) else None


def scope_nodes(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node of a scope's own code: nested defs, classes and lambdas are yielded but
    not entered; of a comprehension only its `:=` targets count (they bind out here)."""
    stack = list(body)[::-1]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NESTED):
            continue
        if isinstance(node, _COMPREHENSIONS):
            yield from (n for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        stack.extend(list(ast.iter_child_nodes(node))[::-1])


def bindings(body: Iterable[ast.AST]) -> Iterator[tuple[str, Binding]]:
    """The names a scope's statements bind, each with what binds it, in source order.
    `from m import *` yields the name `*`."""
    for node in scope_nodes(body):
        if isinstance(node, Definition):
            yield node.name, Binding(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.asname or alias.name.partition(".")[0], Binding(node, alias)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                yield alias.asname or alias.name, Binding(node, alias)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id, Binding(node)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id, Binding(node)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            yield node.name, Binding(node)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest, Binding(node)


def _parameters(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _function_locals(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    if isinstance(node, ast.Lambda):
        return frozenset(_parameters(node.args))
    declared_global: set[str] = set()
    names = _parameters(node.args)
    for inner in scope_nodes(node.body):
        if isinstance(inner, ast.Global):
            declared_global.update(inner.names)
        elif isinstance(inner, ast.Nonlocal):
            names.update(inner.names)  # bound in an enclosing function: not a global read
    names.update(name for name, _ in bindings(node.body))
    return frozenset(names - declared_global)


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# A scope on the way out from a read: (is a class body, the names it binds).
_Scope = tuple[bool, frozenset[str]]


def global_reads(tree: ast.Module) -> list[ast.Name]:
    """The `Name` reads in a module that Python looks up in the module's global scope: not
    bound by an enclosing function, lambda or comprehension, nor by the class body they
    sit directly in (methods do not see their class's names). Raises RecursionError on
    pathologically deep code."""
    found: list[ast.Name] = []

    def is_global(name: str, scopes: tuple[_Scope, ...]) -> bool:
        for depth, (is_class, names) in enumerate(reversed(scopes)):
            if (not is_class or depth == 0) and name in names:
                return False
        return True

    def visit(node: ast.AST, scopes: tuple[_Scope, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            # decorators, defaults and annotations run in the enclosing scope
            outside: list[ast.AST] = [*node.args.defaults]
            outside += [d for d in node.args.kw_defaults if d is not None]
            if not isinstance(node, ast.Lambda):
                outside += node.decorator_list
                params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                params += [p for p in (node.args.vararg, node.args.kwarg) if p is not None]
                outside += [p.annotation for p in params if p.annotation is not None]
                outside += [node.returns] if node.returns is not None else []
            for child in outside:
                visit(child, scopes)
            inner = (*scopes, (False, _function_locals(node)))
            for child in node.body if isinstance(node.body, list) else [node.body]:
                visit(child, inner)
        elif isinstance(node, ast.ClassDef):
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(child, scopes)
            inner = (*scopes, (True, frozenset(name for name, _ in bindings(node.body))))
            for child in node.body:
                visit(child, inner)
        elif isinstance(node, _COMPREHENSIONS):
            first, *rest = node.generators
            visit(first.iter, scopes)  # the first iterable runs outside (class names reach it)
            names = frozenset(set().union(*(_targets(g.target) for g in node.generators)))
            inner = (*scopes, (False, names))
            elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for child in [*first.ifs, *(n for g in rest for n in (g.iter, *g.ifs)), *elements]:
                visit(child, inner)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and is_global(node.id, scopes):
                found.append(node)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, scopes)

    for statement in tree.body:
        visit(statement, ())
    return found
