"""Runs from the command line: `run` starts one and follows it, `follow` follows one,
`runs` lists them, `show` prints one with its transcript, `history` its steps, `fork`
starts a new run from one of its steps, and `cancel`, `resume`, `retry` and `answer`
steer one."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.client.commands import Commands, add_verb
from app.client.exits import Exit
from app.client.http import Client, ClientError, all_pages
from app.client.output import one_line, print_table, usd
from app.runs.cli.follow import follow_here

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


def _agent_id(client: Client, agent: str | None) -> str:
    """An agent given by id or by name; the demo agent (made on first use) by default."""
    name = agent or "demo"
    for found in all_pages(client, "/v1/agents"):
        if name in (found["name"], found["id"]):
            return str(found["id"])
    if agent:
        raise ClientError(f"no agent named {agent!r} (see `loopwright agents`)")
    return str(client.post("/v1/agents", DEMO_AGENT)["id"])


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
    return follow_here(client, started["id"])


def follow(args: argparse.Namespace, client: Client) -> Exit:
    return follow_here(client, args.run)


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


def show(args: argparse.Namespace, client: Client) -> Exit:
    """The run and its transcript."""
    run = client.get(f"/v1/runs/{args.run}")
    usage = run["usage"]
    print(f"run {run['id']}  {run['status']}  lane {run['lane']}  agent {run['agent_id']}")
    print(
        f"iterations {run['iteration']}  tokens in {usage['input_tokens']} "
        f"out {usage['output_tokens']}  cost {usd(usage.get('cost_usd'))}  "
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


def _print_plan(plan: dict[str, Any]) -> None:
    count = plan.get("replans") or 0
    replans = f", {count} replan{'s' * (count > 1)}" if count else ""
    print(f"plan ({len(plan['steps'])} steps{replans}):")
    for index, step in enumerate(plan["steps"]):
        here = "▸" if index == plan.get("current_step") else " "
        print(f" {here} {index + 1}. [{step['status']}] {step['goal']}")
        if step.get("result"):
            print(f"      {step['result']}")


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
    return follow_here(client, forked["id"])


def cancel(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/cancel")
    print(f"run {run['id']}: {run['status']}" + (" (cancel requested)" * run["cancel_requested"]))
    return Exit.COMPLETED


def resume(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/resume")
    print(f"run {run['id']}: {run['status']}")
    return follow_here(client, run["id"]) if args.follow else Exit.COMPLETED


def retry(args: argparse.Namespace, client: Client) -> Exit:
    run = client.post(f"/v1/runs/{args.run}/retry")
    print(f"run {run['id']}: {run['status']}")
    return follow_here(client, run["id"]) if args.follow else Exit.COMPLETED


def answer(args: argparse.Namespace, client: Client) -> Exit:
    body = {"action": "retry_call"} if args.retry_call else {"response": args.text}
    if not args.retry_call and not args.text:
        raise ClientError("say the answer, or --retry-call for a call cut short", Exit.USAGE)
    run = client.post(f"/v1/runs/{args.run}/human-response", body)
    print(f"run {run['id']}: {run['status']}")
    return follow_here(client, run["id"]) if args.follow else Exit.COMPLETED


def register(commands: Commands) -> None:
    started = add_verb(
        commands, "run", "start a run and follow it (asking its questions on a terminal)", run
    )
    started.add_argument("text", help="what to ask")
    started.add_argument("--agent", help="agent id or name (default: the scripted demo agent)")
    started.add_argument("--conversation", help="continue this conversation")
    started.add_argument("--lane", help="queue on this lane")
    started.add_argument(
        "--at", metavar="TIME", help="a delayed run: start no sooner than this ISO 8601 time"
    )
    started.add_argument("--detach", action="store_true", help="start it and return")

    followed = add_verb(commands, "follow", "follow a run's events until it settles", follow)
    followed.add_argument("run", help="run id")

    listed = add_verb(commands, "runs", "list runs, newest first", runs)
    listed.add_argument("--status", help="only runs with this status")
    listed.add_argument("--agent", help="only this agent's runs (id or name)")
    listed.add_argument("--limit", type=int, default=20, help="runs per page (default 20)")
    listed.add_argument("--cursor", help="the page after this one (printed under a full page)")
    listed.add_argument("--oldest", action="store_true", help="oldest first")

    shown = add_verb(commands, "show", "a run and its transcript", show)
    shown.add_argument("run", help="run id")

    steps = add_verb(commands, "history", "a run's steps (boundaries), one line each", history)
    steps.add_argument("run", help="run id")

    forked = add_verb(
        commands, "fork", "start a new run from one of a run's steps, and follow it", fork
    )
    forked.add_argument("run", help="run id")
    forked.add_argument("step", type=int, help="the step to start after (see `history`)")
    forked.add_argument("--input", help="a new message after that step")
    forked.add_argument("--detach", action="store_true", help="start it and return")

    cancelled = add_verb(commands, "cancel", "cancel a run", cancel)
    cancelled.add_argument("run", help="run id")
    for name, help_text, verb in [
        ("resume", "resume a timed-out run from its checkpoint", resume),
        ("retry", "send a failed, dead-lettered or timed-out run back", retry),
    ]:
        steered = add_verb(commands, name, help_text, verb)
        steered.add_argument("run", help="run id")
        steered.add_argument("--follow", action="store_true", help="then follow it")

    answered = add_verb(commands, "answer", "answer the question a run waits on", answer)
    answered.add_argument("run", help="run id")
    answered.add_argument("text", nargs="?", help="the answer")
    answered.add_argument(
        "--retry-call", action="store_true", help="run a call cut short again (it did not happen)"
    )
    answered.add_argument("--follow", action="store_true", help="then follow the run")
