"""Check 2, broken call sites: calls whose arguments no longer fit the signature of the
function they reach (a parameter added without a default, removed or renamed, made
positional- or keyword-only). Only calls whose target `Resolver` knows are checked: plain
and module-qualified functions, `Class(...)` for its `__init__`, `Class.method(...)`.
Calls through instances (`obj.method()`) are not: the receiver's class is unknown."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from app.workspaces.repo.semantic.model import Finding, SemanticCheck, SemanticIssue
from app.workspaces.repo.semantic.modules import Module
from app.workspaces.repo.semantic.resolve import ClassTarget, FunctionTarget, Resolver


def broken_calls(module: Module, resolver: Resolver) -> Iterator[Finding]:
    for node in module.calls:
        target = resolver.expression(node.func, module)
        if isinstance(target, ClassTarget):
            target = resolver.constructor(target)
        if not isinstance(target, FunctionTarget):
            continue
        problems = call_problems(target, node)
        if problems:
            signature = ast.unparse(target.node.args)
            message = (
                f"`{ast.unparse(node.func)}(...)` does not fit `{target.qualname}({signature})`: "
                + "; ".join(problems)
            )
            issue = SemanticIssue(
                SemanticCheck.BROKEN_CALL, module.path, node.lineno, target.qualname, message
            )
            yield Finding(issue, module.text(node.lineno))


def call_problems(target: FunctionTarget, call: ast.Call) -> list[str]:
    """Why Python would refuse to bind the call's arguments to the function's parameters
    (the `TypeError`s of a call, found statically); empty when they fit or when the call
    unpacks `*args` or `**kwargs`, whose contents are unknown."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return []
    spec = target.node.args
    positional_only = [a.arg for a in spec.posonlyargs]
    positional = positional_only + [a.arg for a in spec.args]
    with_default = set(positional[len(positional) - len(spec.defaults) :])
    if target.bound:
        if not positional:
            return []  # `def m(*args)`: the bound argument lands in *args
        positional_only = positional_only[1:]
        positional = positional[1:]
    keyword_only = [a.arg for a in spec.kwonlyargs]
    keyword_required = [
        a.arg for a, d in zip(spec.kwonlyargs, spec.kw_defaults, strict=True) if d is None
    ]

    problems: list[str] = []
    given = len(call.args)
    if given > len(positional) and spec.vararg is None:
        problems.append(f"{given} positional arguments given, at most {len(positional)} taken")
    filled = set(positional[:given])
    for name in (k.arg for k in call.keywords if k.arg is not None):
        if name in positional_only:
            if spec.kwarg is None:
                problems.append(f"positional-only parameter `{name}` passed by keyword")
        elif name in filled:
            problems.append(f"`{name}` given both by position and by keyword")
        elif name in positional or name in keyword_only:
            filled.add(name)
        elif spec.kwarg is None:
            problems.append(f"unexpected keyword argument `{name}`")
    missing = [p for p in positional if p not in with_default and p not in filled]
    missing += [k for k in keyword_required if k not in filled]
    if missing:
        problems.append("missing " + ", ".join(f"`{m}`" for m in missing))
    return problems
