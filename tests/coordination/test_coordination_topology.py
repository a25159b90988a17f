"""The topology a coordination runs in, as a table: every task structure by every topology
requested, over one DAG of waves of 1, 3 and 1 subtasks."""

from __future__ import annotations

import pytest

from app.coordination.engine.topology import resolve_topology
from app.core.vocabulary import CoordinationTopology, TaskStructure

S, T = TaskStructure, CoordinationTopology
WAVES = [1, 3, 1]
BACKBONE = (T.SAS, T.CENTRALIZED, T.SAS)  # context_dependent: one subtask → sas

TABLE = [
    # structure, requested, topology, per wave
    (S.SEQUENTIAL, T.AUTO, T.SAS, (T.SAS,) * 3),
    (S.PARALLEL, T.AUTO, T.CENTRALIZED, (T.CENTRALIZED,) * 3),
    (S.MIXED, T.AUTO, T.CONTEXT_DEPENDENT, BACKBONE),
    *[(s, T.SAS, T.SAS, (T.SAS,) * 3) for s in S],
    *[(s, T.CENTRALIZED, T.CENTRALIZED, (T.CENTRALIZED,) * 3) for s in S],
    *[(s, T.DECENTRALIZED, T.DECENTRALIZED, (T.DECENTRALIZED,) * 3) for s in S],
    *[(s, T.CONTEXT_DEPENDENT, T.CONTEXT_DEPENDENT, BACKBONE) for s in S],
]


def test_the_table_covers_every_pair() -> None:
    assert {(s, r) for s, r, *_ in TABLE} == {(s, r) for s in S for r in T}


@pytest.mark.parametrize(("structure", "requested", "topology", "per_wave"), TABLE)
def test_topology(
    structure: TaskStructure,
    requested: CoordinationTopology,
    topology: CoordinationTopology,
    per_wave: tuple[CoordinationTopology, ...],
) -> None:
    choice = resolve_topology(structure, requested, WAVES)
    assert (choice.topology, choice.per_wave) == (topology, per_wave)
    assert T.AUTO not in choice.per_wave and T.CONTEXT_DEPENDENT not in choice.per_wave


REASONS = [
    (S.SEQUENTIAL, T.AUTO, "auto: a sequential task → sas"),
    (S.MIXED, T.AUTO, "auto: a mixed task → context_dependent; per wave: one subtask → sas"),
    (S.SEQUENTIAL, T.DECENTRALIZED, "decentralized requested"),
    (S.PARALLEL, T.CONTEXT_DEPENDENT, "context_dependent requested; per wave"),
]


@pytest.mark.parametrize(("structure", "requested", "phrase"), REASONS)
def test_the_reason_says_why(
    structure: TaskStructure, requested: CoordinationTopology, phrase: str
) -> None:
    assert phrase in resolve_topology(structure, requested, WAVES).reason
