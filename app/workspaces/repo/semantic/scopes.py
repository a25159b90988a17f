"""The part of Python's scoping rules the semantic checks need: which names a scope's own
statements bind, and which name reads in a module reach its global scope."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
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
        yield from _bound_by(node)


def _bound_by(node: ast.AST) -> Iterator[tuple[str, Binding]]:
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


class _Scope:
    """A function, lambda, comprehension or class body on the way out from a read. Its
    names fill in as the walk goes; reads are judged once the walk is over, because a
    name assigned after its read is still local to the whole function."""

    __slots__ = ("declared_global", "is_class", "is_comprehension", "names")

    def __init__(self, names: Iterable[str] = (), *, is_class: bool = False) -> None:
        self.names = set(names)
        self.declared_global: set[str] = set()
        self.is_class = is_class
        self.is_comprehension = False

    def binds(self, name: str) -> bool:
        return name in self.names and name not in self.declared_global


def global_reads(tree: ast.Module, each: Callable[[ast.AST], None] | None = None) -> list[ast.Name]:
    """The `Name` reads in a module that Python looks up in the module's global scope: not
    bound by an enclosing function, lambda or comprehension, nor by the class body they
    sit directly in (methods do not see their class's names). `each` is called with every
    node on the way, so that callers need no walk of their own. Raises RecursionError on
    pathologically deep code."""
    reads: list[tuple[ast.Name, tuple[_Scope, ...]]] = []
    see = each or (lambda node: None)

    def bind(node: ast.AST, scopes: tuple[_Scope, ...]) -> None:
        if not scopes:
            return  # module level: `bindings` of the module body has those
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            # `:=` binds in the nearest enclosing function, even from a comprehension
            outer = next((s for s in reversed(scopes) if not s.is_comprehension), None)
            if outer is not None:
                outer.names.add(node.target.id)
        if isinstance(node, ast.Global):
            scopes[-1].declared_global.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            scopes[-1].names.update(node.names)  # an enclosing function's: not a global read
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Del):
            scopes[-1].names.add(node.id)  # `del x` makes `x` local, as an assignment does
        else:
            scopes[-1].names.update(name for name, _ in _bound_by(node))

    def visit(node: ast.AST, scopes: tuple[_Scope, ...]) -> None:
        see(node)
        bind(node, scopes)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            # decorators, defaults and annotations run in the enclosing scope
            arguments = node.args
            see(arguments)
            outside: list[ast.AST] = [*arguments.defaults]
            outside += [d for d in arguments.kw_defaults if d is not None]
            params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            params += [p for p in (arguments.vararg, arguments.kwarg) if p is not None]
            if not isinstance(node, ast.Lambda):
                outside += node.decorator_list
                outside += [p.annotation for p in params if p.annotation is not None]
                outside += [node.returns] if node.returns is not None else []
            for child in outside:
                visit(child, scopes)
            inner = (*scopes, _Scope(p.arg for p in params))
            for child in node.body if isinstance(node.body, list) else [node.body]:
                visit(child, inner)
        elif isinstance(node, ast.ClassDef):
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(child, scopes)
            inner = (*scopes, _Scope(is_class=True))
            for child in node.body:
                visit(child, inner)
        elif isinstance(node, _COMPREHENSIONS):
            first, *rest = node.generators
            visit(first.iter, scopes)  # the first iterable runs outside (class names reach it)
            scope = _Scope()
            scope.is_comprehension = True
            inner = (*scopes, scope)
            elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for generator in node.generators:
                see(generator)
                visit(generator.target, inner)
            for child in [*first.ifs, *(n for g in rest for n in (g.iter, *g.ifs)), *elements]:
                visit(child, inner)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                reads.append((node, scopes))
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, scopes)

    for statement in tree.body:
        visit(statement, ())
    return [node for node, scopes in reads if _is_global(node.id, scopes)]


def _is_global(name: str, scopes: tuple[_Scope, ...]) -> bool:
    for depth, scope in enumerate(reversed(scopes)):
        if (not scope.is_class or depth == 0) and scope.binds(name):
            return False
    return True
