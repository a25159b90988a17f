"""Schemathesis hooks for `make fuzz` (loaded through SCHEMATHESIS_HOOKS).

A positive case is one the API promises to accept: it fits the schema *and* the few rules
the schema cannot state, which each operation's description lists. Generated data knows
only the schema, so this turns each positive case into one that also keeps those rules,
changing as little as it can; negative cases are left alone. Every rule here is one the
operation documents; a rule the server enforces that is neither in the schema nor here
shows up as a `positive_data_acceptance` failure, which is the point.
"""

from __future__ import annotations

import os
import re
from typing import Any

import schemathesis
from schemathesis import Case, HookContext

SOFT_LIMIT_DEFAULT_S = 900.0  # app/agents/schemas.py Limits
URL_MAX_CHARS = 2_000  # app/webhooks/schemas.py
HARD_LIMIT_DEFAULT_S = 1_200.0
EXECUTION_ENDS = ("completed", "failed", "cancelled")  # app/core/states.py ExecutionStatus
# What `GET /v1/tools` listed on the server under test (bench/fuzz.py asks it).
KNOWN_TOOLS = sorted(filter(None, os.environ.get("LOOPWRIGHT_FUZZ_TOOLS", "").split(",")))


def _number(value: object, default: float) -> float | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _soft_below_hard(body: dict[str, Any]) -> None:
    """Agents (POST, PATCH): `limits.soft_time_limit_s < limits.hard_time_limit_s`."""
    limits = body.get("limits")
    if not isinstance(limits, dict):
        return
    soft = _number(limits.get("soft_time_limit_s"), SOFT_LIMIT_DEFAULT_S)
    hard = _number(limits.get("hard_time_limit_s"), HARD_LIMIT_DEFAULT_S)
    if soft is not None and hard is not None and soft >= hard:
        hard = max(hard, 1.0)  # 5e-324 halves to 0, which no limit may be
        limits["hard_time_limit_s"], limits["soft_time_limit_s"] = hard, hard / 2


def _tools_known(body: dict[str, Any]) -> None:
    """Agents (POST, PATCH): `tools` and `auto_approve` name tools the server has; each
    unknown name becomes a known one (the list's length and order kept)."""
    if not KNOWN_TOOLS:
        return
    for field in ("tools", "auto_approve"):
        names = body.get(field)
        if isinstance(names, list):
            body[field] = [
                name if name in KNOWN_TOOLS else KNOWN_TOOLS[len(str(name)) % len(KNOWN_TOOLS)]
                for name in names
            ]


def _mcp_names_unique(body: dict[str, Any]) -> None:
    """Agents (POST, PATCH): `mcp_servers` have unique names (a repeated one gets a suffix,
    cut to the name's 24 characters), and a host in brackets is an IPv6 address."""
    servers = body.get("mcp_servers")
    if not isinstance(servers, list):
        return
    seen: set[object] = set()
    for index, server in enumerate(servers):
        if not isinstance(server, dict) or not isinstance(server.get("name"), str):
            continue
        name = server["name"]
        while name in seen:
            name = f"{server['name'][:20].rstrip('_')}_{index}{len(seen)}"[:24]
            index += 1
        server["name"] = name
        seen.add(name)
        url = server.get("url")
        if isinstance(url, str):  # as the field's description says: [host] is IPv6
            server["url"] = re.sub(r"^([^:]*://)\[[^\]]*\]", r"\1[::1]", url, count=1)


def _graph_holds(body: dict[str, Any], *, patch: bool) -> None:
    """Workflows (POST, PATCH): unique node and edge ids, edges between the body's nodes.
    A patch is made self-contained (nodes and edges sent together), since the stored
    definition is not known here."""
    if patch and "nodes" not in body and "edges" not in body:
        return
    nodes, edges = body.get("nodes", []), body.get("edges", [])
    if not isinstance(nodes, list) or not isinstance(edges, list):
        return
    node_ids: set[object] = set()
    kept_nodes = []
    for node in nodes:
        if isinstance(node, dict) and node.get("id") not in node_ids:
            node_ids.add(node.get("id"))
            kept_nodes.append(node)
    edge_ids: set[object] = set()
    kept_edges = []
    for edge in edges:
        ends = (edge.get("source"), edge.get("target")) if isinstance(edge, dict) else ()
        if ends and edge.get("id") not in edge_ids and all(end in node_ids for end in ends):
            edge_ids.add(edge.get("id"))
            kept_edges.append(edge)
    body["nodes"], body["edges"] = kept_nodes, kept_edges


def _public_url(body: dict[str, Any]) -> None:
    """Webhooks (POST, PATCH): `url` reaches a public address (the address policy, which
    the create's description states); its host becomes example.com, its path is kept."""
    url = body.get("url")
    if isinstance(url, str):
        public = re.sub(r"^[^:]*://[^/?#]*", "https://example.com", url, count=1)
        body["url"] = public[:URL_MAX_CHARS]


def _version_matches_header(case: Case[Any], body: dict[str, Any]) -> None:
    """Workflows (PATCH): `version` in the body and `If-Match` agree when both are sent."""
    if "version" in body and case.headers and "If-Match" in case.headers:
        del body["version"]


def _trigger_configs(body: dict[str, Any]) -> None:
    """Triggers (POST, PATCH): a run chain names `agent_id` (no `workflow_id`), a workflow
    chain `workflow_id` (no `agent_id`) and ends an execution can end in; a schedule has
    exactly one of `cron` (a 5-field expression) and `interval_s`, in an IANA zone."""
    config = body.get("config")
    if not isinstance(config, dict):
        return
    if config.get("source") == "run":
        config["agent_id"] = config.get("agent_id") or "agent"
        config.pop("workflow_id", None)
    elif config.get("source") == "workflow":
        config["workflow_id"] = config.get("workflow_id") or "workflow"
        config.pop("agent_id", None)
        statuses = [s for s in config.get("statuses") or [] if s in EXECUTION_ENDS]
        config["statuses"] = statuses or ["completed"]
    if "cron" in config or "interval_s" in config or body.get("kind") == "schedule":
        if config.get("cron") is not None:
            config["cron"] = "0 9 * * MON-FRI"
            config.pop("interval_s", None)
        else:
            config["interval_s"] = config.get("interval_s") or 3_600
            config.pop("cron", None)
        if "timezone" in config:
            config["timezone"] = "Europe/Berlin"


def _references_kept(path: str, body: dict[str, Any]) -> None:
    """Bodies that name another resource, which must exist (each field's description says
    so): an agent's `reports_to` is dropped, a budget of an agent becomes a project's."""
    if path.startswith("/v1/agents"):
        body.pop("reports_to", None)
    elif path == "/v1/budgets":
        body["scope"] = "project"


def _one_way_to_assign(body: dict[str, Any]) -> None:
    """Tasks (POST): `assigned_to` or `routing`, not both; a task with either is no
    coordination's (`coordination` is dropped)."""
    if body.get("assigned_to") is not None:
        body.pop("routing", None)
    if body.get("assigned_to") is not None or body.get("routing") is not None:
        body.pop("coordination", None)


# The smallest decomposition: a coordination needs one, or an agent to make it.
ONE_SUBTASK = {"subtasks": [{"title": "Do it", "acceptance_criteria": ["it is done"]}]}


def _dag_kept(decomposition: Any) -> None:
    """A decomposition (a coordination's, a task's, a workflow node's) is a DAG: each
    subtask depends on earlier ones only, by index (references by key are dropped), and a
    key used twice is dropped the second time."""
    subtasks = decomposition.get("subtasks") if isinstance(decomposition, dict) else None
    if not isinstance(subtasks, list):
        return
    keys: set[object] = set()
    for index, subtask in enumerate(subtasks):
        if not isinstance(subtask, dict):
            continue
        if subtask.get("key") is not None:
            if subtask["key"] in keys:
                subtask.pop("key")
            keys.add(subtask.get("key"))
        depends_on = subtask.get("depends_on")
        if isinstance(depends_on, list):
            subtask["depends_on"] = [d for d in depends_on if type(d) is int and 0 <= d < index]


def _coordination_kept(request: Any, *, started: bool) -> None:
    """A coordination request's decomposition is a DAG; one started now
    (`POST /v1/tasks/{id}/coordinate`) names no agent (none exists on the server under
    test) and so gives its decomposition."""
    if not isinstance(request, dict):
        return
    if started:
        options = request.get("options")
        if isinstance(options, dict):
            options.pop("decomposer", None)
            options.pop("orchestrator", None)
        if not isinstance(request.get("decomposition"), dict):
            request["decomposition"] = ONE_SUBTASK
    _dag_kept(request.get("decomposition"))


def _coordinated_nodes(body: dict[str, Any]) -> None:
    """Workflows (POST, PATCH): a task node's `coordination` is kept as a task's is (not
    beside `assigned_to`; a DAG)."""
    nodes = body.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        config = node.get("config") if isinstance(node, dict) else None
        if not isinstance(config, dict) or "coordination" not in config:
            continue
        if config.get("assigned_to") is not None:
            config.pop("coordination")
        else:
            _coordination_kept(config["coordination"], started=False)


def _board_columns_once(body: dict[str, Any]) -> None:
    """Workflows (POST, PATCH): `board.wip_limits` names each column once (the field's
    description says so); a repeated column's later limits are dropped."""
    board = body.get("board")
    limits = board.get("wip_limits") if isinstance(board, dict) else None
    if not isinstance(board, dict) or not isinstance(limits, list):
        return
    seen: set[object] = set()
    kept = []
    for limit in limits:
        column = limit.get("column") if isinstance(limit, dict) else None
        if column not in seen:
            seen.add(column)
            kept.append(limit)
    board["wip_limits"] = kept


_FAR_OFFSET = re.compile(r"^(\d{4}-\d\d-\d\dT[\d:.]+)([+-](1[6-9]|2\d):\d\d)$")


def _dates_in_order(body: dict[str, Any]) -> None:
    """Sprints (POST, PATCH): `start_date` no later than `end_date` when both are sent."""
    start, end = body.get("start_date"), body.get("end_date")
    if isinstance(start, str) and isinstance(end, str) and start > end:
        body["start_date"], body["end_date"] = end, start


def _storable_times(value: Any) -> Any:
    """Times with a UTC offset Postgres keeps (within ±15:59, as `StorableDatetime` says):
    a farther one is given as UTC instead."""
    if isinstance(value, str):
        return _FAR_OFFSET.sub(r"\1Z", value)
    if isinstance(value, dict):
        return {k: _storable_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable_times(v) for v in value]
    return value


def _range_in_order(case: Case[Any]) -> None:
    """Costs (GET): `start` no later than `end` (`end` is today when left out)."""
    query = case.query
    if not isinstance(query, dict):
        return
    start, end = query.get("start"), query.get("end")
    if isinstance(start, str) and isinstance(end, str) and start > end:
        query["start"], query["end"] = end, start
    elif isinstance(start, str) and end is None and start > "2026":
        query["start"] = "2026-01-01"


def _without_nul_keys(value: Any) -> Any:
    """`--generation-allow-x00=false` keeps NUL out of generated strings but not out of
    generated object keys (`metadata`'s); the API refuses NUL in both, as documented."""
    if isinstance(value, dict):
        return {k: _without_nul_keys(v) for k, v in value.items() if "\x00" not in k}
    if isinstance(value, list):
        return [_without_nul_keys(v) for v in value]
    return value


def _keep_rules(context: HookContext, case: Case[Any]) -> Case[Any]:
    meta = case.meta
    positive = meta is None or meta.generation.mode.is_positive
    operation = context.operation
    if not positive or operation is None:
        return case
    path, method = operation.path, operation.method.upper()
    if path == "/v1/costs":
        _range_in_order(case)
    if not isinstance(case.body, dict):
        return case
    body: dict[str, Any] = _storable_times(_without_nul_keys(case.body))
    case.body = body
    if method in ("POST", "PATCH"):
        _references_kept(path, body)
    if path == "/v1/tasks" and method == "POST":
        _one_way_to_assign(body)
    if path in ("/v1/tasks", "/v1/tasks/{task_id}") and method in ("POST", "PATCH"):
        _coordination_kept(body.get("coordination"), started=False)
    elif path == "/v1/tasks/{task_id}/coordinate":
        _coordination_kept(body, started=True)
    if path in ("/v1/agents", "/v1/agents/{agent_id}") and method in ("POST", "PATCH"):
        _soft_below_hard(body)
        _tools_known(body)
        _mcp_names_unique(body)
    elif path == "/v1/workflows" and method == "POST":
        _graph_holds(body, patch=False)
        _coordinated_nodes(body)
        _board_columns_once(body)
    elif path in ("/v1/triggers", "/v1/triggers/{trigger_id}") and method in ("POST", "PATCH"):
        _trigger_configs(body)
    elif path in ("/v1/sprints", "/v1/sprints/{sprint_id}") and method in ("POST", "PATCH"):
        _dates_in_order(body)
    elif path in ("/v1/webhooks", "/v1/webhooks/{webhook_id}") and method in ("POST", "PATCH"):
        _public_url(body)
    elif path == "/v1/workflows/{workflow_id}" and method == "PATCH":
        _graph_holds(body, patch=True)
        _board_columns_once(body)
        _coordinated_nodes(body)
        _version_matches_header(case, body)
    return case


@schemathesis.hook
def map_case(context: HookContext, case: Case[Any]) -> Case[Any]:
    """The coverage and fuzzing phases."""
    return _keep_rules(context, case)


@schemathesis.hook
def before_add_examples(context: HookContext, examples: list[Case[Any]]) -> None:
    """The examples phase (built from the schema's examples, without `map_case`)."""
    for case in examples:
        _keep_rules(context, case)
