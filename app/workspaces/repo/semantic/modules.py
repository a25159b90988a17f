"""One side of a merge as the checks see it: which modules exist (named from their paths),
and for the parsed ones what they bind at module level."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.workspaces.repo.semantic.scopes import Binding, bindings, global_reads, scope_nodes

# Calls that can bind module names no checker sees; a module that makes one is "open".
# `global_enum` and `_convert_` are the enum module's ways to put members in a module
# (the first also as a decorator). `vars()` counts without arguments only.
_DYNAMIC_CALLS = frozenset({"globals", "exec", "global_enum", "_convert_"})
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def module_names(path: str, source_roots: Sequence[str]) -> tuple[list[str], bool]:
    """The dotted names a file is importable as (`pkg/mod.py` is `pkg.mod`, `pkg/__init__.py`
    is `pkg`; under a source root also without the root), most specific last, and whether
    it is a package. No name for a path that cannot be imported (`my-scripts/x.py`)."""
    *folders, file = path.split("/")
    is_package = file == "__init__.py"
    if not file.endswith(".py"):
        return [], False
    dotted = folders if is_package else [*folders, file.removesuffix(".py")]
    if not dotted or not all(part.isidentifier() for part in dotted):
        return [], is_package
    names = [".".join(dotted)]
    for root in source_roots:
        prefix = [part for part in root.split("/") if part]
        if prefix and dotted[: len(prefix)] == prefix and len(dotted) > len(prefix):
            names.append(".".join(dotted[len(prefix) :]))
    return names, is_package


@dataclass
class Module:
    """A parsed file. `is_open` is set where names may exist that no statement shows: a
    star import, a module `__getattr__`, `globals()`, `vars()`, `exec`, `sys.modules`,
    enum's `global_enum`."""

    path: str
    name: str | None
    is_package: bool
    tree: ast.Module
    lines: list[str]
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    is_open: bool = False
    global_reads: list[ast.Name] = field(default_factory=list)
    global_read_ids: set[int] = field(default_factory=set)
    guarded_imports: set[int] = field(default_factory=set)  # imports under `except ImportError`
    # the nodes the checks look at, gathered in one walk of the tree
    imports: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    calls: list[ast.Call] = field(default_factory=list)
    attributes: list[ast.Attribute] = field(default_factory=list)

    def text(self, line: int) -> str:
        """The stripped source of a line: it identifies an occurrence across line shifts."""
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def absolute(self, module: str | None, level: int) -> str | None:
        """The absolute name of an import's module (`from ..a import b` in `p.q.r` is `p.a`);
        None where a relative import leaves the known packages."""
        if level == 0:
            return module
        if self.name is None:
            return None
        package = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        if level - 1 >= len(package):
            return None
        base = package[: len(package) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def interface(self) -> dict[str, str]:
        """What importers of the module can rely on, per module-level name (and per member
        of a class, as `Class.name`): a def's parameters and decorators, a class's bases,
        an import's source. An importer can only break when one of these is removed or
        changes; added names and changed bodies cannot break it."""
        described: dict[str, str] = {}
        for name, found in self.bindings.items():
            described[name] = " | ".join(self._describe(b) for b in found)
            for binding in found:
                if isinstance(binding.node, ast.ClassDef):
                    for member, shape in _class_members(binding.node):
                        key = f"{name}.{member}"
                        described[key] = (
                            f"{described[key]} | {shape}" if key in described else shape
                        )
        if self.is_open:
            described["*"] = "open"
        return described

    def _describe(self, binding: Binding) -> str:
        node, alias = binding.node, binding.alias
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return _signature(node)
        if isinstance(node, ast.ClassDef):
            head = [ast.dump(e) for e in [*node.bases, *node.keywords, *node.decorator_list]]
            return f"class {head}"
        if alias is not None and isinstance(node, ast.Import | ast.ImportFrom):
            return f"import {self.import_source(node, alias)}"
        return "value"

    def import_source(self, statement: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
        """What an imported name is bound to, as a dotted path (`from .a import b` in package
        `p` is `p.a.b`; `import a.b` binds `a`, `import a.b as c` binds `a.b`)."""
        if isinstance(statement, ast.Import):
            return alias.name if alias.asname else alias.name.partition(".")[0]
        module = self.absolute(statement.module, statement.level)
        if module is None:
            module = "." * statement.level + (statement.module or "")
        return f"{module}.{alias.name}"


def build_module(path: str, source: str, source_roots: Sequence[str]) -> Module:
    """Parse a file and index it. Raises SyntaxError/ValueError for a file that does not
    parse, RecursionError/MemoryError for one nested too deep."""
    tree = ast.parse(source, filename=path)
    names, is_package = module_names(path, source_roots)
    lines = _LINE_BREAKS.split(source)  # as the parser counts them (not str.splitlines)
    module = Module(path, names[-1] if names else None, is_package, tree, lines)
    for name, binding in bindings(tree.body):
        module.bindings.setdefault(name, []).append(binding)
    guards: list[ast.Try | ast.TryStar] = []

    def gather(node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            module.attributes.append(node)
            # `sys.modules[__name__]`: the module reaches its own namespace
            module.is_open |= node.attr == "modules" and _last_name(node.value) == "sys"
        elif isinstance(node, ast.Call):
            module.calls.append(node)
            called = _last_name(node.func)
            module.is_open |= called in _DYNAMIC_CALLS or (called == "vars" and not node.args)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            module.imports.append(node)
        elif isinstance(node, ast.Global):
            for name in node.names:
                module.bindings.setdefault(name, []).append(Binding(node))
        elif isinstance(node, ast.Try | ast.TryStar) and _catches_import_errors(node):
            guards.append(node)
        elif isinstance(node, ast.ClassDef):
            module.is_open |= any(_last_name(d) in _DYNAMIC_CALLS for d in node.decorator_list)

    module.global_reads = global_reads(tree, gather)
    module.global_read_ids = {id(n) for n in module.global_reads}
    for guard in guards:
        guarded = (n for s in guard.body for n in ast.walk(s) if isinstance(n, _Imports))
        module.guarded_imports.update(id(n) for n in guarded)
    for name in _all_names(tree) if "__all__" in source else ():
        module.bindings.setdefault(name, []).append(Binding(tree))
    module.is_open |= "*" in module.bindings or "__getattr__" in module.bindings
    return module


_Imports = (ast.Import, ast.ImportFrom)
_Functions = (ast.FunctionDef, ast.AsyncFunctionDef)


def _class_members(node: ast.ClassDef) -> Iterable[tuple[str, str]]:
    for name, binding in bindings(node.body):
        member = binding.node
        yield name, _signature(member) if isinstance(member, _Functions) else "value"


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    decorators = [ast.dump(d) for d in node.decorator_list]
    return f"def {node.name} {ast.dump(node.args)} {decorators}"


def _catches_import_errors(node: ast.Try | ast.TryStar) -> bool:
    for handler in node.handlers:
        caught = handler.type
        kinds = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        for kind in kinds:
            if kind is None or _last_name(kind) in _IMPORT_ERRORS:
                return True
    return False


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _all_names(tree: ast.Module) -> Iterable[str]:
    """The strings in statements that build `__all__`: a name listed there is taken to
    exist even if no statement shows it binding (when unsure, the checks keep quiet)."""
    for node in scope_nodes(tree.body):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            for constant in ast.walk(node):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    yield constant.value


class Tree:
    """One side of the merge: every module that exists there (from all the paths given),
    and the parsed ones among them. A module that exists but was not parsed is unknown:
    the checks assume it defines whatever is asked of it."""

    def __init__(self, paths: Iterable[str], source_roots: Sequence[str]) -> None:
        self.paths: dict[str, str] = {}  # module name -> path
        ambiguous: set[str] = set()
        for path in paths:
            for name in module_names(path, source_roots)[0]:
                if name in self.paths and self.paths[name] != path:
                    ambiguous.add(name)  # `a.py` and `a/__init__.py`, or two source roots
                self.paths[name] = path
        self.ambiguous = ambiguous
        self.parsed: dict[str, Module] = {}  # path -> module
        self.written: set[tuple[str, str]] = set()  # (module, name) set from outside: `m.x = 1`

    def exists(self, name: str) -> bool:
        return name in self.paths or name in self.ambiguous

    def module(self, name: str) -> Module | None:
        """The parsed module of a name, if it was parsed and the name is not ambiguous."""
        if name in self.ambiguous or name not in self.paths:
            return None
        return self.parsed.get(self.paths[name])

    def defines(self, module: str, name: str) -> bool | None:
        """Whether `module.name` exists (a module-level binding or a submodule); None when
        the module is unknown, open, or not part of this tree."""
        if self.exists(f"{module}.{name}") or (module, name) in self.written:
            return True
        parsed = self.module(module)
        if parsed is None or parsed.is_open:
            return None
        return name in parsed.bindings
