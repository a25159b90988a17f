"""The subtask DAG of a decomposition: the rules its dependencies must keep, and the waves
it runs in.

A subtask names each dependency by index or by key. `problems` lists every broken rule,
naming the field at fault: an unknown dependency, a self-dependency, a duplicate key, and
each dependency that closes a cycle (naming the cycle). `SubtaskDag.of` accepts only a
decomposition without problems. Its `waves` are its topological layers: each wave's
subtasks depend only on earlier waves', so they may run side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.coordination.schemas import Decomposition
from app.core.errors import FieldError, ValidationFailed
from app.core.graphs import closing_cycles, topological_layers

Wave = list[int]  # subtask indices, ascending


@dataclass(frozen=True)
class _Resolved:
    """Each subtask's dependencies as indices, with the position of each in `depends_on`;
    the problems met resolving them (those dependencies are left out)."""

    dependencies: list[list[tuple[int, int]]]  # per subtask: (position, index)
    problems: list[FieldError]


def _resolve(decomposition: Decomposition, where: str) -> _Resolved:
    subtasks = decomposition.subtasks
    by_key: dict[str, int] = {}
    found: list[FieldError] = []
    for i, subtask in enumerate(subtasks):
        if subtask.key is None:
            continue
        if subtask.key in by_key:
            found.append(
                FieldError(
                    f"{where}.subtasks[{i}].key",
                    f"the key {subtask.key!r} is subtask {by_key[subtask.key]}'s already",
                )
            )
        else:
            by_key[subtask.key] = i
    dependencies: list[list[tuple[int, int]]] = []
    for i, subtask in enumerate(subtasks):
        resolved: list[tuple[int, int]] = []
        for position, ref in enumerate(subtask.depends_on):
            field = f"{where}.subtasks[{i}].depends_on[{position}]"
            index = ref if isinstance(ref, int) else by_key.get(ref)
            if index is None:
                found.append(FieldError(field, f"no subtask has the key {ref!r}"))
            elif index >= len(subtasks):
                found.append(
                    FieldError(
                        field, f"no subtask {index} (the indices are 0 to {len(subtasks) - 1})"
                    )
                )
            elif index == i:
                found.append(FieldError(field, "a subtask cannot depend on itself"))
            else:
                resolved.append((position, index))
        dependencies.append(resolved)
    return _Resolved(dependencies, found)


def _checked(decomposition: Decomposition, where: str) -> tuple[_Resolved, list[FieldError]]:
    resolved = _resolve(decomposition, where)
    cycles = closing_cycles(
        range(len(decomposition.subtasks)),
        lambda i: (((i, position), index) for position, index in resolved.dependencies[i]),
    )
    return resolved, resolved.problems + [
        FieldError(
            f"{where}.subtasks[{i}].depends_on[{position}]",
            "closes the cycle " + " -> ".join(map(str, loop)) + " (each depends on the next)",
        )
        for (i, position), loop in cycles
    ]


def problems(decomposition: Decomposition, where: str = "body") -> list[FieldError]:
    """Every rule the decomposition breaks (none: it is a DAG), each naming its field under
    `where`, the decomposition's own path in the request."""
    return _checked(decomposition, where)[1]


@dataclass(frozen=True)
class SubtaskDag:
    """Per subtask (by index), the indices of the subtasks it depends on, ascending."""

    dependencies: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, decomposition: Decomposition, where: str = "body") -> SubtaskDag:
        """The decomposition's DAG; `ValidationFailed` (a 422 naming each field) when it
        breaks a rule."""
        resolved, found = _checked(decomposition, where)
        if found:
            raise ValidationFailed(found)
        return cls(tuple(tuple(sorted({i for _, i in deps})) for deps in resolved.dependencies))

    def waves(self) -> list[Wave]:
        """The topological layers: the first wave holds the subtasks with no dependency,
        each next one those whose dependencies all sit in earlier waves."""
        indices = range(len(self.dependencies))
        return topological_layers(indices, dict(zip(indices, self.dependencies, strict=True)))
