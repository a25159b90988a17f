"""What an expression in a module names, when that can be known without running anything:
a module, a function, a class, or a method reached through its class. Everything else
(instances, assigned values, decorated functions, names bound twice) is unknown: None."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from app.workspaces.repo.semantic.modules import Module, Tree
from app.workspaces.repo.semantic.scopes import Binding, bindings

# Decorators known to keep a function's signature; any other one makes it unknown.
_SAFE_DECORATORS = frozenset({"cache", "lru_cache", "override", "final", "abstractmethod"})
# Bases whose metaclass decides what calling the class does (an Enum call looks a member up).
_CALL_CHANGING_BASES = ("Enum", "Flag", "NamedTuple", "TypedDict", "Protocol")
_MAX_HOPS = 8  # re-exports followed from one module to the next


@dataclass(frozen=True)
class ModuleTarget:
    name: str


@dataclass(frozen=True)
class FunctionTarget:
    """A callable with a known signature. `bound` drops the first parameter: `self` of an
    `__init__` reached through its class, `cls` of a classmethod."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    qualname: str
    bound: bool = False


@dataclass(frozen=True)
class ClassTarget:
    node: ast.ClassDef
    qualname: str


Target = ModuleTarget | FunctionTarget | ClassTarget


def decorator_name(node: ast.expr) -> str | None:
    """`name`, `mod.name`, `name(...)` and `mod.name(...)` are all `name`."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


class Resolver:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._members: dict[int, dict[str, list[Binding]]] = {}  # by id of the ClassDef

    def members(self, cls: ast.ClassDef) -> dict[str, list[Binding]]:
        """The names a class body binds (computed once per class: calls repeat)."""
        if id(cls) not in self._members:
            found: dict[str, list[Binding]] = {}
            for name, binding in bindings(cls.body):
                found.setdefault(name, []).append(binding)
            self._members[id(cls)] = found
        return self._members[id(cls)]

    def expression(self, node: ast.expr, module: Module) -> Target | None:
        """What a name or an attribute chain in `module` refers to. Names bound in a local
        scope are unknown (only global reads are followed)."""
        if isinstance(node, ast.Name):
            if id(node) not in module.global_read_ids:
                return None
            return self._binding(module, node.id, 0)
        if isinstance(node, ast.Attribute):
            base = self.expression(node.value, module)
            if isinstance(base, ModuleTarget):
                return self.member(base.name, node.attr, 0)
            if isinstance(base, ClassTarget):
                return self.method(base, node.attr)
        return None

    def member(self, module_name: str, name: str, hops: int) -> Target | None:
        """`module.name`: what the module binds it to if that is one known thing, or else
        its submodule of that name."""
        module = self.tree.module(module_name)
        if module is not None and not module.is_open and name in module.bindings:
            return self._binding(module, name, hops)
        if self.tree.exists(f"{module_name}.{name}"):
            return ModuleTarget(f"{module_name}.{name}")
        return None

    def _binding(self, module: Module, name: str, hops: int) -> Target | None:
        found = module.bindings.get(name, [])
        if len(found) != 1 or hops > _MAX_HOPS:
            return None  # bound twice (an overload, an `if` and its `else`): unknown
        binding = found[0]
        qualname = f"{module.name}.{name}" if module.name else name
        definition = binding.definition
        if isinstance(definition, ast.ClassDef):
            return ClassTarget(definition, qualname)
        if definition is not None:
            decorators = {decorator_name(d) for d in definition.decorator_list}
            return FunctionTarget(definition, qualname) if decorators <= _SAFE_DECORATORS else None
        return self._import(module, binding, hops)

    def _import(self, module: Module, binding: Binding, hops: int) -> Target | None:
        statement, alias = binding.node, binding.alias
        if alias is None:
            return None
        if isinstance(statement, ast.Import):
            imported = module.import_source(statement, alias)
            return ModuleTarget(imported) if self.tree.exists(imported) else None
        if isinstance(statement, ast.ImportFrom):
            source = module.absolute(statement.module, statement.level)
            return None if source is None else self.member(source, alias.name, hops + 1)
        return None

    def method(self, cls: ClassTarget, name: str) -> FunctionTarget | None:
        """A function of a class's own body called through the class (`C.m(obj, x)`):
        `self` is passed explicitly, a classmethod's `cls` is not."""
        found = self.members(cls.node).get(name, [])
        definition = found[0].definition if len(found) == 1 else None
        if definition is None or isinstance(definition, ast.ClassDef):
            return None
        decorators = {decorator_name(d) for d in definition.decorator_list}
        if not decorators <= _SAFE_DECORATORS | {"staticmethod", "classmethod"}:
            return None
        qualname = f"{cls.qualname}.{name}"
        return FunctionTarget(definition, qualname, bound="classmethod" in decorators)

    def constructor(self, cls: ClassTarget) -> FunctionTarget | None:
        """The `__init__` a call of the class runs, when the class defines it and nothing
        (a decorator, a metaclass, `__new__`, an Enum-like base) changes what a call does."""
        node = cls.node
        bases = {decorator_name(b) or "" for b in node.bases}
        if (
            node.decorator_list
            or node.keywords
            or any(b.endswith(_CALL_CHANGING_BASES) for b in bases)
        ):
            return None
        if "__new__" in self.members(node):
            return None
        init = self.method(cls, "__init__")
        if init is None or init.node.decorator_list:
            return None
        return FunctionTarget(init.node, cls.qualname, bound=True)
