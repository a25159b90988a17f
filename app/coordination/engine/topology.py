"""The topology a coordination runs its waves in, resolved from the one requested (the
task's `coordination_topology`, or the request's) and the task's `task_structure`:

    requested            topology
    sas, centralized,    as requested, for every wave (decentralized, peer debate, is
    decentralized        only ever chosen, never inferred)
    auto                 by the task's structure: sequential → sas (coordination overhead
                         fragments a sequential task), parallel → centralized (an
                         orchestrator fans out and synthesises), mixed → context_dependent
    context_dependent    per wave: a wave of one subtask is the sequential backbone → sas;
                         a wave of several fans out → centralized

`auto` follows the structure the task declares, not the DAG's shape: a sequential task
whose decomposition has a wide wave still runs it with one agent. A pure function; the
coordination records what it chose, so a resumed one keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from app.core.vocabulary import CoordinationTopology, TaskStructure

Topology = CoordinationTopology

AUTO_RULES: Mapping[TaskStructure, Topology] = MappingProxyType(
    {
        TaskStructure.SEQUENTIAL: Topology.SAS,
        TaskStructure.PARALLEL: Topology.CENTRALIZED,
        TaskStructure.MIXED: Topology.CONTEXT_DEPENDENT,
    }
)


@dataclass(frozen=True)
class TopologyChoice:
    """The topology resolved, the one each wave runs in (never `auto` nor
    `context_dependent`), and why."""

    topology: Topology
    per_wave: tuple[Topology, ...]
    reason: str


def _wave_topology(size: int) -> Topology:
    return Topology.SAS if size == 1 else Topology.CENTRALIZED


def resolve_topology(
    structure: TaskStructure, requested: Topology, wave_sizes: Sequence[int]
) -> TopologyChoice:
    """`wave_sizes`: how many subtasks each wave of the DAG holds, in order."""
    topology, reason = requested, f"{requested.value} requested"
    if requested is Topology.AUTO:
        topology = AUTO_RULES[structure]
        reason = f"auto: a {structure.value} task → {topology.value}"
    if topology is not Topology.CONTEXT_DEPENDENT:
        return TopologyChoice(topology, (topology,) * len(wave_sizes), reason)
    per_wave = tuple(_wave_topology(size) for size in wave_sizes)
    reason += "; per wave: one subtask → sas, several → centralized"
    return TopologyChoice(topology, per_wave, reason)
