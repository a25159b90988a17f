"""The workflows pages as HTML over HTTP (tests/ui/test_workflows_page.py drives them in a
browser): the list's paging, a definition with its graph and executions, the editor's
check with errors on nodes and edges, an execution's page and its live fragment, missing
ids, escaping; and the graph's layout on its own."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import httpx
import pytest

from app.core.states import NodeStatus
from app.core.vocabulary import NodeType
from app.dashboard.templating import TEMPLATES
from app.workflows.schemas.workflows import WorkflowEdge, WorkflowNode
from app.workflows.ui import workflows as workflows_page
from app.workflows.ui.graph_layout import MISSING, NODE_H, NODE_W, layout
from tests.support.factories import create_workflow, make_agent, unique
from tests.workflows.test_workflow_executions_api import activate, finish, gated, until
from tests.workflows.test_workflows_api import diamond


def _ids(html: str, prefix: str) -> list[str]:
    return re.findall(rf'id="{prefix}-([\w]+)"', html)


def _node(html: str, node_id: str) -> str:
    """The opening tag of a node of the SVG."""
    found = re.search(rf'<g class="wf-node[^"]*"\s+data-node="{re.escape(node_id)}"[^>]*>', html)
    assert found, f"no node {node_id} in the graph"
    return found[0]


def _kinds(html: str) -> dict[str, str]:
    """Each listed definition's kind, by its id."""
    rows = re.findall(
        r'<tr id="workflow-(\w+)">.*?<td data-label="Kind" class="workflow-kind">(\w+)</td>',
        html,
        re.S,
    )
    return dict(rows)


def _edge(html: str, edge_id: str) -> str:
    found = re.search(rf'<g class="wf-edge[^"]*" data-edge="{re.escape(edge_id)}">', html)
    assert found, f"no edge {edge_id} in the graph"
    return found[0]


# -- the layout ------------------------------------------------------------------------


def _graph(spec: dict[str, Any]) -> tuple[list[WorkflowNode], list[WorkflowEdge]]:
    return (
        [WorkflowNode.model_validate(n) for n in spec["nodes"]],
        [WorkflowEdge.model_validate(e) for e in spec["edges"]],
    )


def test_a_diamond_is_laid_out_in_layers_by_longest_path_without_overlaps() -> None:
    drawn = layout(*_graph(diamond()))
    layers = {node.id: node.layer for node in drawn.nodes}
    assert layers == {"s": 0, "t1": 1, "split": 2, "t2": 3, "t3": 3, "join": 4, "t4": 5, "e": 6}
    for a, b in itertools.combinations(drawn.nodes, 2):
        apart = a.x + NODE_W <= b.x or b.x + NODE_W <= a.x
        assert apart or a.y + NODE_H <= b.y or b.y + NODE_H <= a.y, (a, b)
    for node in drawn.nodes:
        assert node.x + NODE_W <= drawn.width and node.y + NODE_H <= drawn.height
    # Every edge points right, from its source's right side to its target's left side.
    at = {node.id: node for node in drawn.nodes}
    for edge in drawn.edges:
        source, target = at[edge.source], at[edge.target]
        assert edge.path.startswith(f"M{source.x + NODE_W:g} ") and not edge.back
        assert edge.path.endswith(f" {target.x:g} {target.y + NODE_H / 2:g}")
    # The branches sit either side of the line through the split and the join.
    assert at["t2"].y < at["split"].y < at["t3"].y and at["split"].y == at["join"].y


def test_the_barycentre_sweeps_uncross_edges() -> None:
    """a -> (b, c); b -> y, c -> x: defined as x before y, drawn as y before x."""
    nodes = [{"id": n, "type": "task"} for n in ("a", "b", "c", "x", "y")]
    pairs = [("a", "b"), ("a", "c"), ("c", "x"), ("b", "y")]
    edges = [{"id": f"{s}{t}", "source": s, "target": t} for s, t in pairs]
    at = {node.id: node for node in layout(*_graph({"nodes": nodes, "edges": edges})).nodes}
    assert at["b"].y < at["c"].y and at["y"].y < at["x"].y


def test_a_cycle_is_drawn_with_a_back_edge_and_a_missing_node_as_a_placeholder() -> None:
    """And a repeated node id is drawn once, as its first node."""
    nodes = [{"id": n, "type": "task"} for n in ("a", "b")] + [{"id": "a", "type": "end"}]
    edges = [
        {"id": "ab", "source": "a", "target": "b", "type": "conditional_true"},
        {"id": "ba", "source": "b", "target": "a", "label": "again"},
        {"id": "bb", "source": "b", "target": "b"},
        {"id": "bz", "source": "b", "target": "zed"},
    ]
    drawn = layout(*_graph({"nodes": nodes, "edges": edges}))
    assert [(n.id, n.kind, n.layer) for n in drawn.nodes] == [
        ("a", "task", 0),
        ("b", "task", 1),
        ("zed", MISSING, 2),
    ]
    lines = {edge.id: edge for edge in drawn.edges}
    assert [lines[i].back for i in ("ab", "ba", "bb", "bz")] == [False, True, True, False]
    assert (lines["ab"].caption, lines["ba"].caption, lines["bb"].caption) == ("true", "again", "")
    assert lines["ba"].mid_y > NODE_H  # loops below its nodes
    assert layout([], []).nodes == [] and layout([], []).width == 48


def test_node_ids_are_escaped_in_the_graph() -> None:
    """Ids are limited to `[A-Za-z0-9_.:-]` by the schema; the template escapes them even so."""
    odd = WorkflowNode.model_construct(id="<b>x</b>", type=NodeType.TASK, label="<i>", config={})
    view = workflows_page.GraphView.of([odd], [], [])
    html = TEMPLATES.env.from_string(
        '{% from "_workflow_graph.html" import graph, node_table %}{{ graph(v, "t") }}'
        "{{ node_table(v) }}"
    ).render(v=view)
    assert "<b>" not in html and "<i>" not in html
    assert 'data-node="&lt;b&gt;x&lt;/b&gt;"' in html and "&lt;i&gt;" in html


# -- pages -----------------------------------------------------------------------------


async def test_the_list_pages_newest_first(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflows_page, "LIST_PAGE", 2)
    # Read from the test's newest down (the shared database holds other tests' definitions
    # before them); the list's end is its oldest definitions, whoever made them.
    made = [(await create_workflow(client, **diamond(name=f"W{i}")))["id"] for i in range(4)]
    first = await client.get("/ui/workflows", params={"before": made[3]})
    assert first.status_code == 200
    assert _ids(first.text, "workflow") == [made[2], made[1]]
    assert '<a href="/ui/workflows" aria-current="page">Workflows</a>' in first.text
    assert '<td data-label="Nodes" class="num">8</td>' in first.text
    older = re.search(r'href="/ui/workflows\?before=([^"]+)" rel="next"', first.text)
    assert older and older[1] == made[1]
    second = await client.get("/ui/workflows", params={"before": made[1]})
    assert _ids(second.text, "workflow")[0] == made[0]
    oldest = [
        w["id"] for w in (await client.get("/v1/workflows", params={"limit": 2})).json()["items"]
    ]
    last = await client.get("/ui/workflows", params={"before": oldest[1]})
    assert _ids(last.text, "workflow") == oldest[:1]
    assert 'rel="next"' not in last.text and "Newest workflows" in last.text


async def test_the_list_shows_each_kind_and_project_and_a_form_per_template(
    client: httpx.AsyncClient,
) -> None:
    odd = unique("a&b")
    plain = await create_workflow(client, **diamond(name="Plain"))
    made = await client.post(
        "/v1/workflow-templates/kanban/instantiate",
        json={"project": odd, "variables": {"wip_limit": 2}},
    )
    assert made.status_code == 201, made.text
    page = await client.get("/ui/workflows")
    kinds = _kinds(page.text)
    mine = [(i, kinds[i]) for i in kinds if i in (plain["id"], made.json()["id"])]
    assert mine == [(made.json()["id"], "kanban"), (plain["id"], "sequential")]  # newest first
    suffix = odd.removeprefix("a&b")
    assert f'<a href="/ui/projects/a%26b{suffix}/board">a&amp;b{suffix}</a>' in page.text
    forms = re.findall(r'data-instantiate="/v1/workflow-templates/(\w+)/instantiate"', page.text)
    assert forms == ["sequential", "parallel", "kanban", "agile_kanban"]
    assert 'id="agile_kanban-sprint_length" type="number" data-variable="sprint_length"' in (
        page.text
    )
    assert 'value="14" step="1" min="1" max="90" required>' in page.text

    definition = await client.get(f"/ui/workflows/{made.json()['id']}")
    assert '<dd class="workflow-kind">kanban</dd>' in definition.text
    assert "in_progress ≤ 2 (strict), review ≤ 2 (strict)" in definition.text
    assert f'placeholder="a&amp;b{suffix}"' in definition.text


async def test_a_definition_shows_its_graph_its_errors_and_its_executions(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workflows_page, "EXECUTIONS_PAGE", 1)
    workflow = await create_workflow(client, **gated(description="<script>alert(1)</script>"))
    executions = [(await activate(client, workflow["id"], context={"env": "prod"}))["id"]]
    executions.append((await activate(client, workflow["id"]))["id"])
    page = await client.get(f"/ui/workflows/{workflow['id']}")
    assert page.status_code == 200 and "Valid: ready to activate." in page.text
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)" in page.text
    for node_id in ("s", "who", "gate", "deploy", "hold", "notify", "e"):
        assert 'class="wf-node' in _node(page.text, node_id)
    assert _ids(page.text, "node") == ["s", "who", "gate", "deploy", "hold", "notify", "e"]
    assert 'marker-end="url(#wf-arrow)"' in page.text and '<marker id="wf-arrow"' in page.text
    assert ">true</text>" in page.text and ">false</text>" in page.text
    assert _ids(page.text, "execution") == [executions[1]]
    older = await client.get(f"/ui/workflows/{workflow['id']}", params={"before": executions[1]})
    assert _ids(older.text, "execution") == [executions[0]]
    assert 'data-activate="/v1/workflow-executions/activate/' in page.text

    # A draft that activation would refuse: its errors are on its nodes and in a list.
    draft = await create_workflow(client, name="Draft", nodes=[{"id": "t", "type": "task"}])
    page = await client.get(f"/ui/workflows/{draft['id']}")
    assert "Not ready to activate: 3 rules broken" in page.text
    assert "invalid" in _node(page.text, "t")
    assert "task node needs a title" in page.text
    assert "The workflow: exactly one start node is required" in page.text


async def test_the_editor_checks_a_definition_and_marks_its_errors(
    client: httpx.AsyncClient,
) -> None:
    new = await client.get("/ui/workflows/new")
    assert new.status_code == 200 and 'data-save="/v1/workflows" data-method="POST"' in new.text
    assert "&#34;Do the work&#34;" in new.text  # the starter, escaped in its textarea

    # An edge to a node the definition lacks: saving is refused.
    broken = diamond()
    broken["edges"][1]["target"] = "nowhere"
    text = json.dumps(broken)
    checked = await client.post("/ui/workflows/new", data={"definition": text})
    assert checked.status_code == 200
    assert "Saving it is refused until these are fixed" in checked.text
    assert "invalid" in _edge(checked.text, "e2")
    assert "kind-missing" in _node(checked.text, "nowhere")
    assert re.search(
        r'<li data-edge="e2">Edge <code>e2</code>: no node &#39;nowhere&#39;', checked.text
    )
    assert "blocks saving" in checked.text
    assert "&#34;nowhere&#34;" in checked.text  # the text sent comes back to edit

    # A cycle: it may be saved as a draft; activation needs it fixed.
    looped = diamond()
    looped["edges"].append({"id": "back", "source": "t4", "target": "t1"})
    checked = await client.post("/ui/workflows/new", data={"definition": json.dumps(looped)})
    assert "It can be saved as a draft, but activating it needs" in checked.text
    assert "back invalid" in _edge(checked.text, "back")
    assert "closes the cycle t1 -&gt; split" in checked.text
    assert "blocks saving" not in checked.text

    valid = await client.post("/ui/workflows/new", data={"definition": json.dumps(diamond())})
    assert "Valid: it can be saved and activated." in valid.text and "<li data-" not in valid.text

    # Not a definition at all: the schema's errors, escaped, and nothing drawn.
    odd = {"name": "x", "nodes": [{"id": "a", "type": "loop", "<b>": 1}]}
    schema = await client.post("/ui/workflows/new", data={"definition": json.dumps(odd)})
    assert "Not a definition the API takes" in schema.text and "<svg" not in schema.text
    assert "nodes[0].type: Input should be" in schema.text
    assert "nodes[0].&lt;b&gt;: Extra inputs are not permitted" in schema.text
    garbage = await client.post("/ui/workflows/new", content=b"definition=%7B")
    assert "the definition: Invalid JSON" in garbage.text


async def test_the_editor_of_a_definition_saves_over_the_version_it_opened(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **diamond())
    edit = await client.get(f"/ui/workflows/{workflow['id']}/edit")
    assert edit.status_code == 200
    assert f'data-save="/v1/workflows/{workflow["id"]}" data-method="PATCH"' in edit.text
    assert 'data-version="1"' in edit.text and "&#34;review_timeout_s&#34;: 86400" in edit.text
    assert "&#34;label&#34;" not in edit.text  # nodes' and edges' defaults are left out

    # Changed by someone else meanwhile: the check still names the version it opened on.
    await client.patch(f"/v1/workflows/{workflow['id']}", json={"name": "New", "version": 1})
    url = f"/ui/workflows/{workflow['id']}/edit"
    checked = await client.post(url, data={"definition": json.dumps(diamond()), "version": "1"})
    assert 'data-version="1"' in checked.text and "Valid: it can be saved" in checked.text
    unversioned = await client.post(url, data={"definition": json.dumps(diamond())})
    assert 'data-version="2"' in unversioned.text


async def test_an_execution_page_shows_its_nodes_statuses_and_follows_its_stream(
    client: httpx.AsyncClient,
) -> None:
    workflow = await create_workflow(client, **gated())
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    page = await client.get(f"/ui/workflow-executions/{execution['id']}")
    assert page.status_code == 200
    stream = re.search(
        r'data-stream="/v1/workflow-executions/[\w]+/events\?last_event_id=(\d+)"', page.text
    )
    assert stream and int(stream[1]) >= 1  # after the `started` event already shown
    assert "workflow.node.changed" in page.text and "workflow.execution.completed" in page.text
    assert 'data-status="skipped"' in _node(page.text, "hold")
    assert 'data-status="pending"' in _node(page.text, "deploy")
    assert 'task · <tspan class="wf-status">pending</tspan>' in page.text
    assert f'href="/ui/tasks/{execution["node_tasks"]["deploy"]}"' in page.text
    assert '<span class="wf-swatch st-cancelled"></span>cancelled' in page.text  # the legend

    cancelled = await client.post(f"/v1/workflow-executions/{execution['id']}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    live = await client.get(f"/ui/workflow-executions/{execution['id']}/live")
    assert live.status_code == 200 and not live.text.lstrip().startswith("<!doctype")
    assert 'data-status="cancelled"' in _node(live.text, "deploy")
    assert "status-cancelled" in live.text and "cancelled by local" in live.text

    # The definition changes, then goes: the page says so, then lists the statuses alone.
    await client.patch(f"/v1/workflows/{workflow['id']}", json={"name": "Gated 2", "version": 1})
    changed = await client.get(f"/ui/workflow-executions/{execution['id']}/live")
    assert (
        "The definition has changed since this execution started (version 1, now 2)" in changed.text
    )
    assert (await client.delete(f"/v1/workflows/{workflow['id']}")).status_code == 204
    orphan = await client.get(f"/ui/workflow-executions/{execution['id']}")
    assert "Its definition was deleted" in orphan.text and "wf-svg" not in orphan.text
    assert re.search(r'<tr data-node="deploy">\s*<td data-label="Node"><code>deploy', orphan.text)


async def test_a_node_worked_by_an_agent_links_to_its_run(client: httpx.AsyncClient) -> None:
    ann = (await make_agent(client, {"text": "ok"}))["name"]
    workflow = await create_workflow(client, **gated(ann))
    execution = await activate(client, workflow["id"], context={"env": "prod"})
    running = await until(
        client, execution["id"], lambda e: e["node_status"]["deploy"] == NodeStatus.RUNNING
    )
    assert running["node_status"]["deploy"] == "running"
    live = await client.get(f"/ui/workflow-executions/{execution['id']}/live")
    run_link = re.search(r'<a href="/ui/runs/(run_\w+)"><code>', live.text)
    assert run_link and re.search(
        rf'<a href="/ui/runs/{run_link[1]}" tabindex="-1">\s*<rect', live.text
    )


async def test_missing_workflows_and_executions_are_a_404_page_and_no_fragment(
    client: httpx.AsyncClient,
) -> None:
    for path, what in [
        ("/ui/workflows/wf_none", "workflow wf_none"),
        ("/ui/workflows/wf_none/edit", "workflow wf_none"),
        ("/ui/workflow-executions/wfx_none", "workflow execution wfx_none"),
    ]:
        missing = await client.get(path)
        assert missing.status_code == 404 and f"There is no {what}" in missing.text
    checked = await client.post("/ui/workflows/wf_none/edit", data={"definition": "{}"})
    assert checked.status_code == 404
    assert (await client.get("/ui/workflow-executions/wfx_none/live")).status_code == 404


async def test_an_execution_page_shows_its_progress_and_its_limits(
    client: httpx.AsyncClient,
) -> None:
    spec = gated(max_parallel_tasks=3, fail_fast=True)
    spec["nodes"][3]["config"]["resources"] = ["staging-db", "deploy-key"]  # deploy
    spec["nodes"][4]["config"]["resources"] = ["tape"]  # hold: not on the path taken
    workflow = await create_workflow(client, **spec)
    own = await activate(client, workflow["id"], context={"env": "prod"}, max_parallel_tasks=1)
    url = f"/ui/workflow-executions/{own['id']}/live"
    html = (await client.get(url)).text
    assert 'data-done="0" data-total="2"' in html
    assert '<strong class="progress-done">0 of 2</strong> task nodes done' in html
    assert 'aria-label="0 of 2 task nodes done, 0 running, 0 failed"' in html
    assert "at most 1 at once" in html and "set by the activation; the definition says 3" in html
    assert "yes: a failed task fails the execution" in html
    pills = '<span class="pill">staging-db</span><span class="pill">deploy-key</span>'
    assert f"<code>deploy</code>: {pills}" in html
    assert '<code>hold</code>: <span class="pill">tape</span>' in html  # the definition's
    assert '<th scope="col">Resources</th>' in html
    assert re.search(
        r'<tr id="node-notify".*?<td data-label="Resources" class="node-resources"></td>',
        html,
        re.S,
    )

    await finish(client, own["node_tasks"]["deploy"])
    await until(client, own["id"], lambda e: e["progress"]["done"] == 1)
    html = (await client.get(url)).text
    assert '<strong class="progress-done">1 of 2</strong>' in html
    assert '<rect class="done" x="0" width="50.0" height="10"/>' in html

    inherited = await activate(client, workflow["id"], context={"env": "prod"})
    html = (await client.get(f"/ui/workflow-executions/{inherited['id']}/live")).text
    assert "at most 3 at once" in html and "(the definition's)" in html
    changed = {"max_parallel_tasks": None, "fail_fast": False, "version": 1}
    assert (await client.patch(f"/v1/workflows/{workflow['id']}", json=changed)).status_code == 200
    html = (await client.get(f"/ui/workflow-executions/{inherited['id']}/live")).text
    assert "at most 3 at once" in html and "(the definition's then, or the activation's)" in html
    assert "yes: a failed task fails the execution" in html  # its own, kept from activation
    plain = await activate(client, workflow["id"], context={"env": "prod"})
    html = (await client.get(f"/ui/workflow-executions/{plain['id']}/live")).text
    assert "no limit" in html and "no: the other branches go on" in html
