"""Task coordinations from the command line: `tasks coordinate` starts one (the subtasks
from a YAML or JSON file, or an LLM's), `coordinations show` sums one up and
`coordinations follow` prints its events, one a line, until it settles."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import httpx

from app.client.arguments import load_file
from app.client.commands import Commands, add_verb
from app.client.exits import BY_STATUS, Exit
from app.client.http import Client, ClientError, Event, all_pages
from app.client.output import one_line, print_table
from app.core.vocabulary import CoordinationTopology

SETTLED = ("coordination.completed", "coordination.failed", "coordination.cancelled")
_RECONNECTS = 5  # a dropped stream is resumed this many times in a row, then given up


def coordinate(args: argparse.Namespace, client: Client) -> Exit:
    """Start a coordination of a task and print its id; `--follow`: then its events, and
    exit as it settled."""
    if not args.id:
        raise ClientError(
            "say which task: loopwright tasks coordinate TASK_ID [--file subtasks.yaml]",
            Exit.USAGE,
        )
    options = {
        "topology": args.topology,
        "orchestrator": args.orchestrator,
        "decomposer": args.decomposer,
        "max_concurrency_per_wave": args.max_concurrency,
        "fail_fast": args.fail_fast or None,
        "auto_accept": args.auto_accept or None,
    }
    body: dict[str, Any] = {"options": {k: v for k, v in options.items() if v is not None}}
    if args.file:
        body["decomposition"] = _decomposition(Path(args.file))
    started = client.post(f"/v1/tasks/{args.id}/coordinate", body)
    print(f"coordination {started['id']} of task {args.id} ({started['status']})")
    if not args.follow:
        print(f"follow it: loopwright coordinations follow {started['id']}")
        return Exit.COMPLETED
    return _follow(client, started["id"])


def coordinations(args: argparse.Namespace, client: Client) -> Exit:
    """`loopwright coordinations show|follow ID`."""
    if args.action == "follow":
        return _follow(client, args.id)
    return _show(client, args.id)


def _decomposition(path: Path) -> Any:
    """The file's subtasks: `{"subtasks": [...]}`, or the list alone."""
    loaded = load_file(path)
    return {"subtasks": loaded} if isinstance(loaded, list) else loaded


def _show(client: Client, coordination_id: str) -> Exit:
    c = client.get(f"/v1/coordinations/{coordination_id}")
    names = {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")}
    parent = client.get(f"/v1/tasks/{c['parent_task_id']}")
    print(f"coordination {c['id']}  {c['status']}  of task {parent['id']} ({parent['title']})")
    waves = c["wave_topologies"]
    by_wave = f" (waves: {', '.join(waves)})" if set(waves) - {c["topology"]} else ""
    orchestrator = c["orchestrator_agent_id"]
    print(
        f"phase {c['phase']}  topology {c['topology'] or '-'}{by_wave}  "
        f"orchestrator {names.get(orchestrator, orchestrator) or '-'}"
    )
    if c["outcome"] or c["reason"]:
        print(f"outcome {c['outcome'] or '-'}: {c['reason'] or ''}".rstrip(": "))
    print("phases:")
    for result in c["phase_results"]:
        print(f"  {phase_line(result)}")
    titles = [s["title"] for s in (c["decomposition"] or {}).get("subtasks", [])]
    rows = []
    for s in sorted(c["subtasks"], key=lambda s: (s["wave"], s["index"])):
        task = client.get(f"/v1/tasks/{s['task_id']}")
        agent = names.get(s["agent_id"], s["agent_id"]) or f"none: {s['route_reason']}"
        title = titles[s["index"]] if s["index"] < len(titles) else ""
        rows.append((str(s["index"]), str(s["wave"]), task["status"], agent, s["task_id"], title))
    if rows:
        print_table(
            [(*row[:5], one_line(row[5], 50)) for row in rows],
            ("SUBTASK", "WAVE", "STATUS", "AGENT", "TASK", "TITLE"),
        )
    for run in c["runs"]:
        round_ = f" round {run['round']}" if run["round"] is not None else ""
        print(f"{run['purpose']} run {run['run_id']}{round_}")
    return Exit.COMPLETED


def phase_line(result: dict[str, Any]) -> str:
    """`route ok 12 ms: 3 of 3 subtasks have an agent`"""
    line = f"{result['phase']} {result['outcome']} {result['duration_ms']} ms"
    return f"{line}: {result['detail']}" if result["detail"] else line


def event_line(event: Event, names: dict[str, str]) -> str:
    data, kind = event.data, event.type
    if kind == "coordination.started":
        given = "given" if data.get("decomposition_given") else "from the decomposer"
        return f"started: task {data.get('parent_task_id')}, subtasks {given}"
    if kind == "coordination.phase.completed":
        return phase_line(data)
    if kind == "coordination.subtask.started":
        agent = names.get(data["agent_id"], data["agent_id"])
        return f"▸ subtask {data['index']} (wave {data['wave']}) to {agent}: {data['task_id']}"
    if kind == "coordination.run.created":
        round_ = f" round {data['round']}" if data.get("round") is not None else ""
        return f"· {data['purpose']} run {data['run_id']}{round_}"
    if kind in SETTLED:
        outcome = f" (task {data['outcome']})" if data.get("outcome") else ""
        reason = f": {data['reason']}" if data.get("reason") else ""
        return f"[{data['status']}]{outcome}{reason}"
    return f"· {kind}"


def _follow(client: Client, coordination_id: str) -> Exit:
    """Print the coordination's events from its first until it settles (its stream stays
    open after that); a dropped stream is resumed after the last event printed."""
    names = {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")}
    after, drops = "0", 0
    while True:
        try:
            for event in client.stream(f"/v1/coordinations/{coordination_id}/events", after):
                drops = 0
                after = event.id or after
                print(event_line(event, names), flush=True)
                if event.type in SETTLED:
                    return BY_STATUS.get(str(event.data.get("status")), Exit.FAILED)
            problem = "the server ended it"  # shutting down, say: resume where it was
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            problem = str(exc)
        drops += 1
        if drops > _RECONNECTS:
            raise ClientError(f"the coordination's stream keeps dropping ({problem})")
        time.sleep(min(2**drops / 4, 5))


def add_coordinate_options(tasks: argparse.ArgumentParser) -> None:
    """`tasks coordinate`'s options, on the `tasks` verb (`app/tasks/cli.py`)."""
    tasks.add_argument(
        "--file",
        help='coordinate: the subtasks, a YAML or JSON file of {"subtasks": [...]} '
        "(default: the decomposer's LLM makes them)",
    )
    tasks.add_argument(
        "--topology",
        choices=[topology.value for topology in CoordinationTopology],
        help="coordinate: how the agents work together (default: the task's)",
    )
    tasks.add_argument("--orchestrator", help="coordinate: the agent that synthesises (id or name)")
    tasks.add_argument(
        "--decomposer", help="coordinate: the agent whose model splits the task (no --file)"
    )
    tasks.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="coordinate: at most N subtasks of a wave at once",
    )
    tasks.add_argument(
        "--fail-fast", action="store_true", help="coordinate: a failed subtask stops the rest"
    )
    tasks.add_argument(
        "--auto-accept",
        action="store_true",
        help="coordinate: accept the subtasks' results without a person's review",
    )
    tasks.add_argument(
        "--follow", action="store_true", help="coordinate: then follow it until it settles"
    )


def register(commands: Commands) -> None:
    parser = add_verb(
        commands,
        "coordinations",
        "a coordination's phases and subtasks, or its events",
        coordinations,
    )
    parser.add_argument("action", choices=["show", "follow"])
    parser.add_argument("id", help="coordination id")
