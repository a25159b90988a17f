"""Following a run: its events printed until it settles, a question it waits on asked at
the terminal (when there is one) and the answer sent, a dropped stream resumed where it
broke off."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import httpx

from app.client.exits import BY_STATUS, Exit
from app.client.http import Client, ClientError
from app.runs.cli.render import SETTLED, Printer

Ask = Callable[[str], str]  # shows a prompt, returns the line typed (EOFError: none)
_RECONNECTS = 5  # a dropped stream is resumed this many times in a row, then given up


def follow_here(client: Client, run_id: str) -> Exit:
    """Follow the run on this command's output, asking its questions only of a person at a
    terminal, and exit as the run came to."""
    ask = input if sys.stdin.isatty() and sys.stdout.isatty() else None
    status = follow(client, run_id, Printer(sys.stdout), ask)
    return BY_STATUS.get(status, Exit.FAILED)


def follow(client: Client, run_id: str, printer: Printer, ask: Ask | None) -> str:
    """The status the run came to: settled, or `waiting_on_human` when it waits on a person
    and `ask` is None (no terminal) or the person gave no answer."""
    after = "0"
    drops = 0
    while True:
        settled: str | None = None
        waiting = False
        try:
            for event in client.events(run_id, after):
                drops = 0
                after = event.id if event.id is not None else after
                printer.show(event)
                status = event.data.get("status")
                if event.type.startswith("agent_run.") and status is not None:
                    # The latest status decides (a time-out may be followed by a resume);
                    # once settled, the stream ends by itself shortly after.
                    settled = str(status) if status in SETTLED else None
                if event.type == "agent_run.waiting_on_human":
                    waiting = True
                    break
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            drops += 1
            if drops > _RECONNECTS:
                raise ClientError(f"the run's event stream keeps dropping ({exc})") from exc
            time.sleep(min(2**drops / 4, 5))
            continue
        if settled is not None:
            return settled
        if waiting:
            run = client.get(f"/v1/runs/{run_id}")
            if run["status"] != "waiting_on_human":
                continue  # answered meanwhile: go on reading
            if ask is None or not _answer(client, run, printer, ask):
                printer.say(f"  answer it with: loopwright answer {run_id} 'your answer'")
                return "waiting_on_human"


def _answer(client: Client, run: dict[str, Any], printer: Printer, ask: Ask) -> bool:
    """Ask the person what the run waits on and send it; False when they gave nothing."""
    waiting_for = run.get("waiting_for") or {}
    try:
        if waiting_for.get("reason") == "approval":
            return _decide(client, waiting_for, printer, ask)
        if waiting_for.get("reason") == "resume_unsafe":
            printer.say("  The call was cut short: it may or may not have taken effect.")
            again = ask("  Run it again (only if it did not take effect)? [y/N] ")
            if again.strip().lower() in ("y", "yes"):
                client.post(f"/v1/runs/{run['id']}/human-response", {"action": "retry_call"})
                return True
        answer = ask("> ").strip()
    except EOFError:
        return False
    if not answer:
        return False
    client.post(f"/v1/runs/{run['id']}/human-response", {"response": answer})
    return True


def _decide(client: Client, waiting_for: dict[str, Any], printer: Printer, ask: Ask) -> bool:
    approval = client.get(f"/v1/approvals/{waiting_for['approval_id']}")
    printer.say(f"  {approval.get('summary') or waiting_for.get('tool')}")
    choice = ask("  Approve this call? [y/n] ").strip().lower()
    if choice in ("y", "yes"):
        comment = ask("  Comment (optional): ").strip()
        client.post(f"/v1/approvals/{approval['id']}/approve", {"comment": comment or None})
        return True
    if choice in ("n", "no"):
        reason = ask("  Why not? ").strip() or "rejected at the terminal"
        client.post(f"/v1/approvals/{approval['id']}/reject", {"reason": reason})
        return True
    return False
