"""Workflows in the dashboard: the definitions (`/ui/workflows`), one definition with its
graph and its executions, an editor that checks a definition and draws its errors on its
nodes and edges, and an execution (`/ui/workflow-executions/{id}`) whose graph shows each
node's status, with its progress and its limits (parallel tasks, fail-fast, each task
node's resources), live.

Graphs are laid out here (`graph_layout`) and drawn as inline SVG by the templates. The
editor's check runs the engine's own rules (`validate_workflow`, whose structural part is
what saving requires); saving, activating and the live stream are the API's routes, called
by the pages' script."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError

from app.core.states import NodeStatus
from app.core.streams import execution_stream
from app.core.vocabulary import NodeType
from app.dashboard.deps import DbDep, ServicesDep, Viewer, ViewerDep
from app.dashboard.page import NavItem, Page
from app.dashboard.templating import render
from app.events import store as event_store
from app.events import ui as events
from app.tasks.store import task_runs as task_run_store
from app.tasks.store import tasks as task_store
from app.workflows import store as workflow_store
from app.workflows.engine.workflow_graph import structural_issues, validate_workflow
from app.workflows.schemas.workflows import (
    ExecutionRead,
    ValidationIssue,
    WorkflowCreate,
    WorkflowEdge,
    WorkflowNode,
    WorkflowRead,
)
from app.workflows.ui.graph_layout import Layout, PlacedEdge, layout

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = Page(router, NavItem("workflows", "Workflows", "/ui/workflows", order=50))

LIST_PAGE = 50  # definitions per page of the list
EXECUTIONS_PAGE = 50  # executions per page of a definition's list

Before = Annotated[str | None, Query(max_length=200)]
_VERSION = re.compile(r"[1-9][0-9]{0,17}")  # a version as a form sends it back
_NAMED = re.compile(r"^(?:node|edge) '[^']*': ")  # how validation messages name their place

# What the editor starts a new definition with: the smallest one that can be activated.
STARTER = {
    "name": "New workflow",
    "nodes": [
        {"id": "start", "type": "start"},
        {"id": "work", "type": "task", "config": {"title": "Do the work"}},
        {"id": "end", "type": "end"},
    ],
    "edges": [
        {"id": "e1", "source": "start", "target": "work"},
        {"id": "e2", "source": "work", "target": "end"},
    ],
}


@dataclass(frozen=True)
class GraphView:
    """What the graph templates draw: the layout, the validation issues on each node and
    edge (and those that name neither), and for an execution each node's status, the task
    made for it and that task's newest run."""

    layout: Layout
    node_issues: dict[str, list[ValidationIssue]] = field(default_factory=dict)
    edge_issues: dict[str, list[ValidationIssue]] = field(default_factory=dict)
    other_issues: list[ValidationIssue] = field(default_factory=list)
    status: dict[str, NodeStatus] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)
    resources: dict[str, list[str]] = field(default_factory=dict)  # of task nodes naming any

    @classmethod
    def of(
        cls,
        nodes: list[WorkflowNode],
        edges: list[WorkflowEdge],
        issues: list[ValidationIssue] | None = None,
        *,
        execution: ExecutionRead | None = None,
        runs: dict[str, str] | None = None,
        resources: dict[str, list[str]] | None = None,
    ) -> GraphView:
        """`resources`: the task nodes' resources where the definition's are not the ones
        that hold (an execution's tasks carry their own)."""
        view = cls(
            layout(nodes, edges),
            status=execution.node_status if execution else {},
            tasks=execution.node_tasks if execution else {},
            runs=runs or {},
            resources={k: v for k, v in (node_resources(nodes) | (resources or {})).items() if v},
        )
        for issue in issues or []:
            if issue.node_id is not None:
                view.node_issues.setdefault(issue.node_id, []).append(issue)
            elif issue.edge_id is not None:
                view.edge_issues.setdefault(issue.edge_id, []).append(issue)
            else:
                view.other_issues.append(issue)
        return view

    def leaving(self, node_id: str) -> list[PlacedEdge]:
        """The edges out of a node, for the table that lists what each node leads to."""
        return [edge for edge in self.layout.edges if edge.source == node_id]

    @staticmethod
    def note(issue: ValidationIssue) -> str:
        """An issue's message as the graph writes it next to its node or edge: without the
        `node 'x': ` it starts with, which the place says."""
        return _NAMED.sub("", issue.message, count=1)

    @property
    def issue_count(self) -> int:
        found = [*self.node_issues.values(), *self.edge_issues.values(), self.other_issues]
        return sum(len(issues) for issues in found)


@dataclass(frozen=True)
class Check:
    """The editor's answer: the definition's schema errors (it cannot be drawn), or its
    graph with every broken rule, and which of those stop it being saved."""

    schema_errors: list[str] = field(default_factory=list)
    graph: GraphView | None = None
    blocking: list[ValidationIssue] = field(default_factory=list)  # refused by saving

    @property
    def can_save(self) -> bool:
        return not self.schema_errors and not self.blocking

    @property
    def valid(self) -> bool:
        return self.graph is not None and self.graph.issue_count == 0


@router.get("/workflows")
async def workflows_list(
    request: Request, viewer: ViewerDep, db: DbDep, services: ServicesDep, before: Before = None
) -> HTMLResponse:
    """Newest first, a page at a time; `before`: the page after that definition. Below
    them, a form per built-in template makes a definition from it (the API's
    `POST /v1/workflow-templates/{name}/instantiate`, called by the page's script)."""
    rows = await workflow_store.list_workflows(
        db, after_id=before, limit=LIST_PAGE + 1, newest_first=True
    )
    workflows = rows[:LIST_PAGE]
    context = {
        "section": "workflows",
        "workflows": workflows,
        "older": workflows[-1].id if len(rows) > LIST_PAGE else None,
        "first_page": before is None,
        "templates": [t.summary() for t in services.templates.catalogue().values()],
    }
    return render(request, "workflows.html", viewer, context)


@router.get("/workflows/new")
async def new_workflow(request: Request, viewer: ViewerDep) -> HTMLResponse:
    text = json.dumps(STARTER, indent=2)
    return _editor(request, viewer, None, text, None)


@router.post("/workflows/new")
async def check_new_workflow(request: Request, viewer: ViewerDep) -> HTMLResponse:
    """The editor again, with the definition it sent checked and drawn."""
    text = (await _form(request)).get("definition", "")
    return _editor(request, viewer, None, text, check(text))


@router.get("/workflows/{workflow_id}")
async def workflow_page(
    workflow_id: str, request: Request, viewer: ViewerDep, db: DbDep, before: Before = None
) -> HTMLResponse:
    """The definition's graph with what stops its activation marked on it, and its
    executions, newest first (`before`: the page after that execution)."""
    workflow = await workflow_store.get_workflow(db, workflow_id)
    if workflow is None:
        return _not_found(request, viewer, f"workflow {workflow_id}")
    rows = await workflow_store.list_executions(
        db, workflow_id, after_id=before, limit=EXECUTIONS_PAGE + 1, newest_first=True
    )
    executions = rows[:EXECUTIONS_PAGE]
    issues = validate_workflow(workflow.nodes, workflow.edges)
    context = {
        "section": "workflows",
        "workflow": workflow,
        "graph": GraphView.of(workflow.nodes, workflow.edges, issues),
        "executions": executions,
        "older": executions[-1].id if len(rows) > EXECUTIONS_PAGE else None,
        "first_page": before is None,
    }
    return render(request, "workflow_definition.html", viewer, context)


@router.get("/workflows/{workflow_id}/edit")
async def edit_workflow(
    workflow_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> HTMLResponse:
    workflow = await workflow_store.get_workflow(db, workflow_id)
    if workflow is None:
        return _not_found(request, viewer, f"workflow {workflow_id}")
    return _editor(request, viewer, workflow, _definition_text(workflow), None)


@router.post("/workflows/{workflow_id}/edit")
async def check_edited_workflow(
    workflow_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> HTMLResponse:
    """The editor again, with the definition it sent checked; saving it still replaces
    the version the editor was opened on (the form sends it back)."""
    workflow = await workflow_store.get_workflow(db, workflow_id)
    if workflow is None:
        return _not_found(request, viewer, f"workflow {workflow_id}")
    form = await _form(request)
    text = form.get("definition", "")
    opened_on = form.get("version", "")
    version = int(opened_on) if _VERSION.fullmatch(opened_on) else workflow.version
    return _editor(request, viewer, workflow, text, check(text), version=version)


@router.get("/workflow-executions/{execution_id}")
async def execution_page(
    execution_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> HTMLResponse:
    """The execution's graph with each node's status, kept live by following its stream
    from where it stood when the page was read."""
    # Read before the execution: an event committed in between is then both on the page
    # and replayed, never in neither.
    since = await event_store.last_seq(db, execution_stream(execution_id))
    execution = await workflow_store.get_execution(db, execution_id)
    if execution is None:
        return _not_found(request, viewer, f"workflow execution {execution_id}")
    context = {
        "section": "workflows",
        **await _execution(db, execution),
        "stream": f"/v1/workflow-executions/{execution.id}/events?last_event_id={since}",
        "events": events.WORKFLOW_EXECUTION,
    }
    return render(request, "workflow_execution.html", viewer, context)


@router.get("/workflow-executions/{execution_id}/live")
async def execution_live(
    execution_id: str, request: Request, viewer: ViewerDep, db: DbDep
) -> Response:
    """The part of the execution's page that its events change: its status, its graph
    and its table of nodes."""
    execution = await workflow_store.get_execution(db, execution_id)
    if execution is None:
        return Response(status_code=404)
    return render(request, "_workflow_execution_live.html", viewer, await _execution(db, execution))


def node_resources(nodes: list[WorkflowNode]) -> dict[str, list[str]]:
    """The resources each task node's config names (a config that does not fit, as in a
    draft the editor checks, names none)."""
    found: dict[str, list[str]] = {}
    for node in nodes:
        if node.type is NodeType.TASK:
            raw = node.config.get("resources")
            found[node.id] = [str(r) for r in raw] if isinstance(raw, list) else []
    return found


def parallel_source(execution: ExecutionRead, workflow: WorkflowRead | None) -> str | None:
    """Where the execution's `max_parallel_tasks` came from: `activation` (it set its own)
    or `definition`; None when the definition has changed since or is gone, and the two
    can no longer be told apart (the execution keeps only the limit it runs under)."""
    if workflow is None or workflow.version != execution.workflow_version:
        return None
    same = execution.max_parallel_tasks == workflow.max_parallel_tasks
    return "definition" if same else "activation"


def check(text: str) -> Check:
    """A definition as the editor sends it (JSON text), checked by the API's rules."""
    try:
        body = WorkflowCreate.model_validate_json(text)
    except ValidationError as exc:
        return Check(schema_errors=[_schema_error(error) for error in exc.errors()])
    issues = validate_workflow(body.nodes, body.edges)
    return Check(
        graph=GraphView.of(body.nodes, body.edges, issues),
        blocking=structural_issues(body.nodes, body.edges),
    )


def _schema_error(error: Any) -> str:
    """`nodes[2].type: Input should be …`"""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"])
    return f"{where.lstrip('.') or 'the definition'}: {error['msg']}"


def _definition_text(workflow: WorkflowRead) -> str:
    """What the editor shows of a definition: every field saving replaces, with the nodes'
    and edges' defaults left out (they come back the same)."""
    fields = workflow.model_dump(mode="json", include=set(WorkflowCreate.model_fields))
    fields["nodes"] = [n.model_dump(mode="json", exclude_defaults=True) for n in workflow.nodes]
    fields["edges"] = [e.model_dump(mode="json", exclude_defaults=True) for e in workflow.edges]
    return json.dumps(fields, indent=2, ensure_ascii=False)


def _editor(
    request: Request,
    viewer: Viewer,
    workflow: WorkflowRead | None,
    text: str,
    checked: Check | None,
    *,
    version: int | None = None,
) -> HTMLResponse:
    context = {
        "section": "workflows",
        "workflow": workflow,
        "version": version or (workflow.version if workflow else None),
        "text": text,
        "check": checked,
    }
    return render(request, "workflow_edit.html", viewer, context)


async def _execution(db: DbDep, execution: ExecutionRead) -> dict[str, object]:
    """What an execution's page shows: the execution, its definition (None once deleted)
    and its graph, each node with its status, its task and that task's newest run."""
    workflow = await workflow_store.get_workflow(db, execution.workflow_id)
    runs: dict[str, str] = {}
    for node_id, task_id in execution.node_tasks.items():
        run = await task_run_store.latest_run(db, task_id)
        if run is not None:
            runs[node_id] = run.id
    # A node's task carries the resources it was made with: the definition may have changed.
    made = {t.id: t for t in await task_store.get_tasks(db, list(execution.node_tasks.values()))}
    resources = {
        node_id: made[task_id].resources
        for node_id, task_id in execution.node_tasks.items()
        if task_id in made
    }
    graph = None
    if workflow is not None:
        graph = GraphView.of(
            workflow.nodes, workflow.edges, execution=execution, runs=runs, resources=resources
        )
    return {
        "execution": execution,
        "workflow": workflow,
        "graph": graph,
        "runs": runs,
        "resources": graph.resources if graph else {k: v for k, v in resources.items() if v},
        "parallel_source": parallel_source(execution, workflow),
        "statuses": list(NodeStatus),
    }


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", errors="replace")
    return dict(parse_qsl(body, keep_blank_values=True))


def _not_found(request: Request, viewer: Viewer, what: str) -> HTMLResponse:
    context = {"section": "workflows", "what": what}
    return render(request, "not_found.html", viewer, context, status_code=404)
