"""The client verbs of `loopwright`: each takes the parsed command line and a client, and
returns how the command exits."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.client.exits import BY_STATUS, Exit
from app.client.http import Client, ClientError
from app.core.signatures import SIGNATURE_HEADER, signature_header
from app.runs.cli.follow import Ask, follow
from app.runs.cli.render import Printer

Verb = Callable[[argparse.Namespace, Client], Exit]

DEMO_AGENT = {
    "name": "demo",
    "role": "demo assistant",
    "system_prompt": "You are Loopwright's demo agent.",
    "tools": ["echo"],
    "model": {
        "provider": "scripted",
        "name": "scripted-demo",
        "script": [
            {"tool_calls": [{"name": "echo", "input": {"note": "thinking out loud"}}]},
            {
                "text": "Hello from the Loopwright demo agent. Your run went through a tool call "
                "and came back; give an agent a real model to do real work."
            },
        ],
    },
}


def _printer() -> Printer:
    return Printer(sys.stdout)


def _ask() -> Ask | None:
    """Questions are asked only of a person at a terminal."""
    return input if sys.stdin.isatty() and sys.stdout.isatty() else None


def print_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _followed(client: Client, run_id: str) -> Exit:
    status = follow(client, run_id, _printer(), _ask())
    return BY_STATUS.get(status, Exit.FAILED)


def _agent_id(client: Client, agent: str | None) -> str:
    """An agent given by id or by name; the demo agent (made on first use) by default."""
    name = agent or "demo"
    for found in all_pages(client, "/v1/agents"):
        if name in (found["name"], found["id"]):
            return str(found["id"])
    if agent:
        raise ClientError(f"no agent named {agent!r} (see `loopwright agents`)")
    return str(client.post("/v1/agents", DEMO_AGENT)["id"])


def all_pages(client: Client, path: str, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = client.get(path, limit=200, cursor=cursor, **params)
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def run(args: argparse.Namespace, client: Client) -> Exit:
    body: dict[str, Any] = {"agent_id": _agent_id(client, args.agent), "input": args.text}
    if args.conversation:
        body["conversation_id"] = args.conversation
    if args.lane:
        body["lane"] = args.lane
    if args.at:
        body["not_before"] = args.at
    started = client.post("/v1/runs", body)
    waits = f", not before {started['not_before']}" if started["not_before"] else ""
    print(f"run {started['id']} on lane {started['lane']} ({started['status']}{waits})")
    if args.detach:
        return Exit.COMPLETED
    return _followed(client, started["id"])


def follow_run(args: argparse.Namespace, client: Client) -> Exit:
    return _followed(client, args.run)


def runs(args: argparse.Namespace, client: Client) -> Exit:
    agent = _agent_id(client, args.agent) if args.agent else None
    page = client.get(
        "/v1/runs",
        status=args.status,
        agent_id=agent,
        limit=args.limit,
        cursor=args.cursor,
        order="oldest" if args.oldest else "newest",
    )
    names = {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")}
    rows = [
        (
            r["id"],
            r["status"],
            names.get(r["agent_id"], r["agent_id"]),
            r["stop_reason"] or "",
            r["created_at"][:19].replace("T", " "),
            one_line((r.get("error") or {}).get("message", ""), 60),
        )
        for r in page["items"]
    ]
    print_table(rows, ("RUN", "STATUS", "AGENT", "STOP", "CREATED (UTC)", "ERROR"))
    if page["next_cursor"]:
        print(f"more: loopwright runs --cursor {page['next_cursor']}")
    return Exit.COMPLETED


def _print_plan(plan: dict[str, Any]) -> None:
    count = plan.get("replans") or 0
    replans = f", {count} replan{'s' * (count > 1)}" if count else ""
    print(f"plan ({len(plan['steps'])} steps{replans}):")
    for index, step in enumerate(plan["steps"]):
        here = "▸" if index == plan.get("current_step") else " "
        print(f" {here} {index + 1}. [{step['status']}] {step['goal']}")
        if step.get("result"):
            print(f"      {step['result']}")


def show(args: argparse.Namespace, client: Client) -> Exit:
    """The run and its transcript."""
    run = client.get(f"/v1/runs/{args.run}")
    usage = run["usage"]
    print(f"run {run['id']}  {run['status']}  lane {run['lane']}  agent {run['agent_id']}")
    print(
        f"iterations {run['iteration']}  tokens in {usage['input_tokens']} "
        f"out {usage['output_tokens']}  cost {_usd(usage.get('cost_usd'))}  "
        f"attempt {run['attempt']}" + (f"  stop {run['stop_reason']}" if run["stop_reason"] else "")
    )
    if run.get("error"):
        print(f"error: {run['error'].get('message')}")
    if run.get("waiting_for"):
        print(f"waiting for: {run['waiting_for'].get('question')}")
    if run.get("execution_loop"):
        print(f"loop {run['execution_loop']['kind']} ({run['execution_loop']['reason']})")
    if run.get("plan"):
        _print_plan(run["plan"])
    print()
    after = -1
    while True:
        messages = client.get(
            f"/v1/conversations/{run['conversation_id']}/messages", after=after, limit=1000
        )
        for message in messages:
            if message["run_id"] == run["id"]:
                _print_message(message)
        if len(messages) < 1000:
            return Exit.COMPLETED
        after = messages[-1]["position"]


def history(args: argparse.Namespace, client: Client) -> Exit:
    """The run's steps: one line each, with what it appended and answered."""
    rows = [
        (
            str(step["seq"]),
            step["kind"],
            step["status"],
            step["at"][11:23],
            one_line(_step_summary(step), 70),
        )
        for step in all_pages(client, f"/v1/runs/{args.run}/history")
    ]
    print_table(rows, ("STEP", "KIND", "STATUS", "AT (UTC)", "WHAT"))
    print(f"fork from a step: loopwright fork {args.run} STEP [--input TEXT]")
    return Exit.COMPLETED


def _step_summary(step: dict[str, Any]) -> str:
    parts = [f"→ {c['tool']}" for c in step["started"]]
    parts += [("✗ " if a["is_error"] else "✓ ") + a["result"] for a in step["answered"]]
    said = [b["text"] for m in step["messages"] for b in m["content"] if b["type"] == "text"]
    parts += said[:1]
    events = [e for e in step["events"] if e.startswith("agent_run.")]
    return "; ".join(parts or [e.removeprefix("agent_run.") for e in events])


def fork(args: argparse.Namespace, client: Client) -> Exit:
    body: dict[str, Any] = {"from_seq": args.step}
    if args.input:
        body["input"] = args.input
    forked = client.post(f"/v1/runs/{args.run}/fork", body)
    print(f"run {forked['id']} forked from {args.run} after step {args.step}")
    if args.detach:
        return Exit.COMPLETED
    return _followed(client, forked["id"])


def _print_message(message: dict[str, Any]) -> None:
    for block in message["content"]:
        kind = block.get("type")
        if kind == "text":
            print(f"{message['role']}: {block['text']}")
        elif kind == "tool_use":
            print(f"  → {block['name']} {json.dumps(block.get('input', {}), ensure_ascii=False)}")
        elif kind == "tool_result":
            content = block.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            mark = "✗" if block.get("is_error") else "✓"
            print(f"  {mark} {one_line(text, 500)}")


def one_line(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cancel(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/cancel")
    print(f"run {run['id']}: {run['status']}" + (" (cancel requested)" * run["cancel_requested"]))
    return Exit.COMPLETED


def resume(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/resume")
    print(f"run {run['id']}: {run['status']}")
    return _followed(client, run["id"]) if args.follow else Exit.COMPLETED


def retry(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/retry")
    print(f"run {run['id']}: {run['status']}")
    return _followed(client, run["id"]) if args.follow else Exit.COMPLETED


def answer(args: argparse.Namespace, client: Client) -> Exit:
    body = {"action": "retry_call"} if args.retry_call else {"response": args.text}
    if not args.retry_call and not args.text:
        raise ClientError("say the answer, or --retry-call for a call cut short", Exit.USAGE)
    run = client.post(f"/v1/runs/{args.run}/human-response", body)
    print(f"run {run['id']}: {run['status']}")
    return _followed(client, run["id"]) if args.follow else Exit.COMPLETED


def approvals(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "approve":
        decided = client.post(f"/v1/approvals/{args.id}/approve", {"comment": args.comment})
    elif args.action == "reject":
        if not args.reason:
            raise ClientError("a rejection needs --reason", Exit.USAGE)
        decided = client.post(f"/v1/approvals/{args.id}/reject", {"reason": args.reason})
    else:
        items = all_pages(client, "/v1/approvals", status=args.status)
        rows = [
            (
                a["id"],
                a["kind"],
                a["status"],
                a.get("run_id") or a.get("task_id") or "",
                one_line(a.get("summary") or "", 70),
            )
            for a in items
        ]
        print_table(rows, ("APPROVAL", "KIND", "STATUS", "FOR", "SUMMARY"))
        return Exit.COMPLETED
    print(f"approval {decided['id']}: {decided['status']}")
    return Exit.COMPLETED


def tasks(args: argparse.Namespace, client: Client) -> Exit:
    """List tasks; route one to an agent by a strategy."""
    if args.action == "route":
        if not args.id or not args.strategy:
            raise ClientError(
                "say which task and how: loopwright tasks route TASK_ID --strategy S", Exit.USAGE
            )
        body = {"strategy": args.strategy, "role": args.role, "skills": args.skill or []}
        if args.agent:
            body["agent"] = args.agent
        routed = client.post(f"/v1/tasks/{args.id}/route", body)
        chain = " → ".join(routed["delegation_chain"])
        via = f" (via {chain})" if chain else ""
        print(f"task {routed['id']}: {routed['status']} to {routed['assigned_to']}{via}")
        return Exit.COMPLETED
    rows = [
        (t["id"], t["status"], t["priority"], t["assigned_to"] or "", one_line(t["title"], 50))
        for t in all_pages(client, "/v1/tasks", status=args.status)
    ]
    print_table(rows, ("TASK", "STATUS", "PRIORITY", "ASSIGNED TO", "TITLE"))
    return Exit.COMPLETED


def webhooks(args: argparse.Namespace, client: Client) -> Exit:
    """List webhooks; a webhook's delivery log, newest first; redeliver one delivery."""
    if args.action == "list":
        rows = [
            (w["id"], "on" if w["enabled"] else "off", w["url"], ", ".join(w["event_types"]))
            for w in all_pages(client, "/v1/webhooks")
        ]
        print_table(rows, ("WEBHOOK", "ENABLED", "URL", "EVENTS"))
        return Exit.COMPLETED
    if not args.webhook:
        raise ClientError(
            f"say which webhook: loopwright webhooks {args.action} WEBHOOK_ID", Exit.USAGE
        )
    base = f"/v1/webhooks/{args.webhook}/deliveries"
    if args.action == "redeliver":
        if not args.delivery:
            raise ClientError("say which delivery: … redeliver WEBHOOK_ID DELIVERY_ID", Exit.USAGE)
        sent = client.post(f"{base}/{args.delivery}/redeliver", {})
        print(f"delivery {sent['id']}: {sent['status']}")
        return Exit.COMPLETED
    page = client.get(base, status=args.status, limit=args.limit)
    entries = [
        (
            d["id"],
            d["event_type"],
            d["status"],
            str(d["attempts"]),
            str(d["last_status_code"] or "") or one_line(d["last_error"] or "", 40),
            "" if d["last_latency_ms"] is None else f"{d['last_latency_ms']} ms",
            d["created_at"][:19].replace("T", " "),
        )
        for d in page["items"]
    ]
    print_table(
        entries, ("DELIVERY", "EVENT", "STATUS", "ATTEMPTS", "LAST", "LATENCY", "CREATED (UTC)")
    )
    return Exit.COMPLETED


def agents(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "create":
        if not args.file:
            raise ClientError("say which file: loopwright agents create agent.yaml", Exit.USAGE)
        created = client.post("/v1/agents", load_file(Path(args.file)))
        print(f"agent {created['id']} ({created['name']})")
        for warning in created.get("warnings") or []:
            print(f"warning: {warning}")
        return Exit.COMPLETED
    rows = [
        (
            a["id"],
            a["name"],
            f"{a['model']['provider']}/{a['model']['name']}",
            ", ".join(a["tools"]),
        )
        for a in all_pages(client, "/v1/agents")
    ]
    print_table(rows, ("AGENT", "NAME", "MODEL", "TOOLS"))
    return Exit.COMPLETED


def load_file(path: Path) -> Any:
    """An agent from a YAML or JSON file (JSON is YAML too)."""
    import yaml  # here: the other verbs start without it

    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror}", Exit.USAGE) from exc
    except yaml.YAMLError as exc:
        raise ClientError(f"{path} is not YAML or JSON: {exc}", Exit.USAGE) from exc


_IDEMPOTENCY = {
    "always": "idempotent",
    "never": "side-effecting",
    "by_input": "idempotent or not by its input",
}
_APPROVAL = {
    "always": "always asks a person",
    "never": "never asks a person",
    "side_effects": "a side-effecting call asks a person unless the agent auto-approves it",
}


def tools(args: argparse.Namespace, client: Client) -> Exit:
    for tool in client.get("/v1/tools"):
        print(f"{tool['name']}: {_IDEMPOTENCY[tool['idempotency']]}; {_APPROVAL[tool['approval']]}")
        print(f"  {one_line(tool['description'], 200)}")
        schema = tool["input_schema"]
        if args.schemas:
            print("  " + json.dumps(schema, indent=2).replace("\n", "\n  "))
            continue
        required = set(schema.get("required", []))
        fields = [
            f"{name}{'' if name in required else '?'}: {_type(prop)}"
            for name, prop in schema.get("properties", {}).items()
        ]
        print(f"  input: {{{', '.join(fields)}}}")
    return Exit.COMPLETED


def _type(prop: dict[str, Any]) -> str:
    """A property's JSON type, in short: `string`, `integer|null`, `any`."""
    if "type" in prop:
        kind = prop["type"]
        return "|".join(kind) if isinstance(kind, list) else str(kind)
    variants = [_type(v) for v in prop.get("anyOf", [])]
    return "|".join(variants) if variants else "any"


SECRET_ENV = "LOOPWRIGHT_TRIGGER_SECRET"


def triggers(args: argparse.Namespace, client: Client) -> Exit:
    if args.action == "fire":
        return _fire(args, client)
    rows = [
        (
            t["id"],
            t["kind"],
            t["name"],
            "yes" if t["enabled"] else "no",
            _target(t["target"]),
            t["next_fire_at"] or "",
            t["last_fired_at"] or "",
        )
        for t in all_pages(client, "/v1/triggers", kind=args.kind)
    ]
    print_table(rows, ("TRIGGER", "KIND", "NAME", "ENABLED", "TARGET", "NEXT FIRE", "LAST FIRED"))
    return Exit.COMPLETED


def _target(target: dict[str, Any]) -> str:
    if target["kind"] == "run":
        return f"run of {target['agent_id']}"
    return f"workflow {target['workflow_id']}"


def schedules(args: argparse.Namespace, client: Client) -> Exit:
    """Schedule triggers, each with its next fire times (as the server computed them) in
    its own zone, one a line; a paused (disabled) schedule has none."""
    rows: list[tuple[str, ...]] = []
    for t in all_pages(client, "/v1/triggers", kind="schedule"):
        config = t["config"]
        when = config["cron"] or f"every {_every(config['interval_s'])}"
        times = [_local(at, config["timezone"]) for at in t["next_fire_times"] or []]
        first = times[0] if times else ("paused" if not t["enabled"] else "")
        head = (t["id"], t["name"], when, config["timezone"], "yes" if t["enabled"] else "no")
        rows.append((*head, first))
        rows += [("",) * len(head) + (at,) for at in times[1:]]
    print_table(rows, ("TRIGGER", "NAME", "SCHEDULE", "ZONE", "ENABLED", "NEXT FIRES"))
    return Exit.COMPLETED


def costs(args: argparse.Namespace, client: Client) -> Exit:
    """What LLM calls cost between two days, one line per agent, project, model or day,
    and the total."""
    report = client.get("/v1/costs", group_by=args.by, start=args.start, end=args.end)
    names = (
        {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")} if args.by == "agent" else {}
    )
    rows = [
        (
            names.get(line["key"], line["key"]) or "(none)",
            str(line["calls"]),
            str(line["input_tokens"] + line["cache_write_tokens"] + line["cache_read_tokens"]),
            str(line["output_tokens"]),
            # Nothing priced: the cost is not known, not zero.
            _usd(line["cost_usd"] if line["calls"] > line["unpriced_calls"] else None),
            str(line["unpriced_calls"] or ""),
        )
        for line in [*report["items"], {"key": "total", **report["total"]}]
    ]
    print(f"{report['start']} to {report['end']} (UTC)")
    print_table(rows, (args.by.upper(), "CALLS", "TOKENS IN", "OUT", "USD", "UNPRICED CALLS"))
    return Exit.COMPLETED


def budgets(args: argparse.Namespace, client: Client) -> Exit:
    """Budgets with where each stands in its current period."""
    names = {a["id"]: a["name"] for a in all_pages(client, "/v1/agents")}
    rows = []
    for b in all_pages(client, "/v1/budgets"):
        now = b["current"]
        subject = names.get(b["subject"], b["subject"]) if b["scope"] == "agent" else b["subject"]
        rows.append(
            (
                b["id"],
                f"{b['scope']} {subject}",
                f"{now['period_start']}..{now['period_end']}",
                _usd(b["limit_usd"]),
                _usd(now["spent_usd"]),
                _usd(now["reserved_usd"]),
                f"{now['spent_percent']:g}%",
            )
        )
    if not rows:
        print("no budgets: runs spend without a limit (POST /v1/budgets sets one)")
        return Exit.COMPLETED
    print_table(rows, ("BUDGET", "FOR", "PERIOD", "LIMIT", "SPENT", "RESERVED", "USED"))
    return Exit.COMPLETED


def _usd(cost: float | None) -> str:
    """Dollars to the cent, or to four places under a cent; `?` when not known."""
    if cost is None:
        return "?"
    return f"${cost:,.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"


def _every(seconds: int) -> str:
    """An interval in short: `1h30m`, `2d`, `90s` is `1m30s`."""
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _local(at: str, zone: str) -> str:
    """A fire time in the schedule's zone with its abbreviation (`2026-03-29 03:00 CEST`),
    or as the server sent it if this machine does not know the zone."""
    from datetime import datetime
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return datetime.fromisoformat(at).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
    except (ZoneInfoNotFoundError, ValueError):
        return at


def _fire(args: argparse.Namespace, client: Client) -> Exit:
    """A test delivery to a webhook trigger, signed as a sender would sign it."""
    if not args.id:
        raise ClientError("say which trigger: loopwright triggers fire TRIGGER_ID", Exit.USAGE)
    secret = args.secret or os.environ.get(SECRET_ENV)
    if not secret:
        raise ClientError(
            f"the trigger's secret signs the delivery: pass --secret or set {SECRET_ENV}",
            Exit.USAGE,
        )
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise ClientError(f"--payload is not JSON: {exc}", Exit.USAGE) from exc
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature_header(secret, int(time.time()), body),
    }
    if args.delivery:
        headers["Loopwright-Delivery"] = args.delivery
    answer = client.post_raw(f"/v1/hooks/{args.id}", body, headers)
    started = answer["run_id"] or answer["execution_id"]
    what = f"run {started}" if answer["run_id"] else f"execution {started}"
    if answer["status"] == "started":
        print(f"fire {answer['fire_id']}: started {what}")
    else:
        print(f"fire {answer['fire_id']}: {answer['status']}: {answer['error']}")
        return Exit.FAILED
    if args.follow and answer["run_id"]:
        return _followed(client, answer["run_id"])
    return Exit.COMPLETED
