"""A workflow definition's graph laid out for drawing as SVG: layered, left to right.

A node's layer (its column) is the longest path to it from a root, so every edge points
right. Within a layer, nodes are ordered by a few barycentre sweeps (each node moves
towards the mean place of its neighbours, those before it, then those after it): that
removes most crossings of the small graphs workflows are, without the cost of an optimal
order. Positions are then a grid, each column centred on the tallest, so no two nodes
overlap.

An invalid definition is drawn too, so that its errors can be shown on it: edges that close
a cycle are left out of the layering and drawn as back edges (looping below), and an edge
to a node the definition lacks gets a placeholder node of kind `missing`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from app.core.vocabulary import EdgeType
from app.workflows.schemas.workflows import WorkflowEdge, WorkflowNode

NODE_W = 184
NODE_H = 52
GAP_X = 72  # between layers: room for the edges and their labels
GAP_Y = 40  # between the nodes of a layer: room for an error line under a node
MARGIN = 24
SWEEPS = 4  # barycentre sweeps, each down then up; more rarely changes a small graph
MISSING = "missing"  # the kind of a node an edge names but the definition lacks

_BRANCH_WORDS = {EdgeType.CONDITIONAL_TRUE: "true", EdgeType.CONDITIONAL_FALSE: "false"}


@dataclass(frozen=True)
class PlacedNode:
    id: str
    kind: str  # the node's type, or `missing`
    label: str
    layer: int
    x: float  # the top left corner
    y: float
    width: float = NODE_W
    height: float = NODE_H


@dataclass(frozen=True)
class PlacedEdge:
    id: str
    source: str
    target: str
    kind: str  # the edge's type
    caption: str  # its label, else `true` / `false` for a conditional's branches
    path: str  # SVG path data, ending where the arrowhead goes
    mid_x: float  # the middle of the path, for its caption
    mid_y: float
    back: bool  # closes a cycle: drawn looping below


@dataclass(frozen=True)
class Layout:
    nodes: list[PlacedNode]  # in definition order, placeholders last
    edges: list[PlacedEdge]  # in definition order
    width: float
    height: float


def layout(nodes: Sequence[WorkflowNode], edges: Sequence[WorkflowEdge]) -> Layout:
    """The nodes placed on a grid and the edges as paths between them. A repeated node id
    is drawn once (validation reports it)."""
    kinds: dict[str, str] = {}
    labels: dict[str, str] = {}
    for node in nodes:
        if node.id not in kinds:
            kinds[node.id], labels[node.id] = node.type.value, node.label
    for edge in edges:
        for end in (edge.source, edge.target):
            if end not in kinds:
                kinds[end], labels[end] = MISSING, ""
    order = list(kinds)
    back = _back_edges(order, edges)
    forward = [e for i, e in enumerate(edges) if i not in back]
    layers = _layers(order, forward)
    columns = _ordered_columns(order, layers, forward)

    tallest = max((len(column) for column in columns), default=0)
    placed: dict[str, PlacedNode] = {}
    for layer, column in enumerate(columns):
        offset = (tallest - len(column)) / 2  # centred on the tallest column
        for index, node_id in enumerate(column):
            placed[node_id] = PlacedNode(
                node_id,
                kinds[node_id],
                labels[node_id],
                layer,
                MARGIN + layer * (NODE_W + GAP_X),
                MARGIN + (index + offset) * (NODE_H + GAP_Y),
            )
    lines = [
        _line(edge, placed[edge.source], placed[edge.target], i in back)
        for i, edge in enumerate(edges)
    ]
    width = 2 * MARGIN + len(columns) * (NODE_W + GAP_X) - (GAP_X if columns else 0)
    height = 2 * MARGIN + tallest * (NODE_H + GAP_Y)
    return Layout([placed[node_id] for node_id in order], lines, width, height)


def _back_edges(order: list[str], edges: Sequence[WorkflowEdge]) -> set[int]:
    """The indexes of the edges a depth-first walk (from the nodes in definition order)
    finds closing a cycle: without them the graph is acyclic."""
    outgoing: dict[str, list[int]] = defaultdict(list)
    for i, edge in enumerate(edges):
        outgoing[edge.source].append(i)
    back: set[int] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in order:
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [iter(outgoing[root])]
        while stack:
            index = next(stack[-1], None)
            if index is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            target = edges[index].target
            if state.get(target) == 1:
                back.add(index)
            elif target not in state:
                state[target] = 1
                path.append(target)
                stack.append(iter(outgoing[target]))
    return back


def _layers(order: list[str], edges: Sequence[WorkflowEdge]) -> dict[str, int]:
    """Each node's longest path from a root, over acyclic `edges` (in topological order:
    a node's layer is final once all its predecessors' are)."""
    waiting = dict.fromkeys(order, 0)
    outgoing: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        waiting[edge.target] += 1
        outgoing[edge.source].append(edge.target)
    layer = dict.fromkeys(order, 0)
    ready = [node_id for node_id in order if waiting[node_id] == 0]
    while ready:
        node_id = ready.pop()
        for target in outgoing[node_id]:
            layer[target] = max(layer[target], layer[node_id] + 1)
            waiting[target] -= 1
            if waiting[target] == 0:
                ready.append(target)
    return layer


def _ordered_columns(
    order: list[str], layers: dict[str, int], edges: Sequence[WorkflowEdge]
) -> list[list[str]]:
    """The layers' nodes, top to bottom: definition order, then barycentre sweeps."""
    columns: list[list[str]] = [[] for _ in range(max(layers.values(), default=-1) + 1)]
    for node_id in order:
        columns[layers[node_id]].append(node_id)
    before: dict[str, list[str]] = defaultdict(list)
    after: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        before[edge.target].append(edge.source)
        after[edge.source].append(edge.target)
    for _ in range(SWEEPS):
        for neighbours, sweep in ((before, columns[1:]), (after, columns[-2::-1])):
            for column in sweep:
                column.sort(key=partial(_barycentre, _places(columns), neighbours))
    return columns


def _barycentre(place: dict[str, float], neighbours: dict[str, list[str]], node_id: str) -> float:
    """The mean place of the node's neighbours; its own place when it has none on that
    side (the sort is stable, so it stays where it is)."""
    around = [place[m] for m in neighbours[node_id]] or [place[node_id]]
    return sum(around) / len(around)


def _places(columns: list[list[str]]) -> dict[str, float]:
    """Each node's height in its column, measured from the column's middle (columns are
    drawn centred)."""
    return {
        node_id: index - (len(column) - 1) / 2
        for column in columns
        for index, node_id in enumerate(column)
    }


def _line(edge: WorkflowEdge, source: PlacedNode, target: PlacedNode, back: bool) -> PlacedEdge:
    """A cubic curve from the source's right side to the target's left side; a back edge
    (its target is in an earlier layer, or is its source) from the source's bottom to the
    target's, looping below."""
    if back:
        x1, y1 = source.x + NODE_W * 2 / 3, source.y + NODE_H
        x2, y2 = target.x + NODE_W / 3, target.y + NODE_H
        c1, c2 = (x1, y1 + GAP_Y), (x2, y2 + GAP_Y)
    else:
        x1, y1 = source.x + NODE_W, source.y + NODE_H / 2
        x2, y2 = target.x, target.y + NODE_H / 2
        bend = (x2 - x1) / 2
        c1, c2 = (x1 + bend, y1), (x2 - bend, y2)
    path = f"M{x1:g} {y1:g} C{c1[0]:g} {c1[1]:g} {c2[0]:g} {c2[1]:g} {x2:g} {y2:g}"
    return PlacedEdge(
        id=edge.id,
        source=edge.source,
        target=edge.target,
        kind=edge.type.value,
        caption=edge.label or _BRANCH_WORDS.get(edge.type, ""),
        path=path,
        # The curve's point at t = 1/2.
        mid_x=(x1 + 3 * c1[0] + 3 * c2[0] + x2) / 8,
        mid_y=(y1 + 3 * c1[1] + 3 * c2[1] + y2) / 8,
        back=back,
    )
