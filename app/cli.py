"""The `loopwright` command. The server: `serve`, `worker`, `migrate`, `openapi`. A client
of a running server (LOOPWRIGHT_URL, LOOPWRIGHT_API_KEY): `run`, `follow`, `runs`, `show`,
`cancel`, `resume`, `retry`, `answer`, `approvals`, `tasks`, `board`, `sprints`,
`workspace`, `worktrees`, `workflows`, `coordinations`, `agents`, `triggers`, `tools`.

The client verbs start in a fraction of the server's time: the server's stack (settings,
FastAPI, SQLAlchemy, and pydantic under them) is imported by the server commands only."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from app.client import verbs
from app.client.exits import Exit
from app.client.http import DEFAULT_URL, Client, ClientError
from app.client.verbs import Verb
from app.coordination import cli as coordinations
from app.core.net import listening_socket
from app.core.process import tune_gc
from app.core.vocabulary import AssignmentStrategy, CoordinationTopology
from app.sprints import cli as sprints
from app.tasks import cli as boards
from app.telemetry.logs import configure_logging
from app.telemetry.tracing import TracingMisconfigured
from app.workflows import cli as workflow_verbs
from app.workspaces import cli as workspaces

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from app.core.config import Settings

Handler = Callable[[argparse.Namespace], None]


def _server_command(command: Handler) -> Handler:
    """A server command, whose settings are read from the environment: a wrong one is a
    line per setting and exit status 2, not a traceback."""

    def handler(args: argparse.Namespace) -> None:
        from pydantic import ValidationError
        from pydantic_settings import SettingsError

        try:
            command(args)
        except (ValidationError, SettingsError) as exc:
            sys.stderr.write("".join(f"loopwright: {line}\n" for line in settings_problems(exc)))
            raise SystemExit(2) from None
        except TracingMisconfigured as exc:  # an OTEL_* variable (app/telemetry/tracing.py)
            sys.stderr.write(f"loopwright: {exc}\n")
            raise SystemExit(2) from None

    return handler


def _settings(args: argparse.Namespace) -> Settings:
    from app.core.config import Settings, load_settings

    server: dict[str, object] = {}
    if getattr(args, "host", None):
        server["host"] = args.host
    if getattr(args, "port", None) is not None:
        server["port"] = args.port
    base = load_settings()
    if not server:
        return base
    merged = base.model_dump()
    merged["server"].update(server)
    # Re-validate so the loopback rule sees the new host.
    return Settings.model_validate(merged)


def _serve(args: argparse.Namespace) -> None:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from app.main import create_app

    settings = _settings(args)
    configure_logging(settings.log_level, settings.log_format)
    # Bound before the start, so that a port in use is said at once, not after the banner
    # has announced a service that will never answer there.
    listening = _listen(settings.server.host, settings.server.port)
    app = create_app(settings, announce=True)
    tune_gc()
    config = uvicorn.Config(
        app,
        log_level=settings.log_level.lower(),
        # uvicorn's own logging config would give its loggers plain-text handlers; without
        # it they propagate to ours: JSON, one access line per response with its request id.
        log_config=None,
        timeout_graceful_shutdown=int(settings.task_engine.drain_timeout_s) + 5,
    )
    server = uvicorn.Server(config)
    # As uvicorn.run does: Ctrl+C after the graceful stop is a normal exit, and a start that
    # failed (e.g. the database refused) exits 3.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listening])
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


def _listen(host: str, port: int) -> socket.socket:
    try:
        return listening_socket(host, port)
    except OSError as exc:
        sys.stderr.write(
            f"loopwright: cannot listen on {host}:{port} ({os.strerror(exc.errno or 0)}); another "
            "service may hold it: stop it, or choose another port with --port or "
            "LOOPWRIGHT_SERVER__PORT\n"
        )
        raise SystemExit(2) from None


def _worker(args: argparse.Namespace) -> None:
    """Run workers without serving HTTP: the same composition root, minus the server."""
    import signal

    from app.core.config import load_settings
    from app.main import create_app

    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    app = create_app(settings)
    tune_gc()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with app.router.lifespan_context(app):
            logging.getLogger("loopwright").info("worker running; SIGTERM stops it")
            await stop.wait()

    asyncio.run(run())


def _client_verb(verb: Verb) -> Handler:
    def handler(args: argparse.Namespace) -> None:
        try:
            with Client(args.url, args.api_key) as client:
                code = verb(args, client)
        except ClientError as exc:
            print(f"loopwright: {exc}", file=sys.stderr)
            code = exc.exit_code
        except BrokenPipeError:  # the reader went away (`| head`): nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = Exit.COMPLETED
        except KeyboardInterrupt:
            print(
                "\nloopwright: stopped following; the run or coordination goes on", file=sys.stderr
            )
            code = Exit.INTERRUPTED
        raise SystemExit(int(code))

    return handler


def _migrate(args: argparse.Namespace) -> None:
    from app.core.config import load_settings
    from app.db import migrate
    from app.db.connection import make_engine
    from app.db.embedded_pg import start_embedded

    settings = load_settings()
    embedded = None
    url = settings.database.url
    if url is None:
        embedded = start_embedded(settings.database.embedded_data_dir)
        url = embedded.url

    async def run(url: str) -> None:
        engine = make_engine(url)
        try:
            if args.action == "upgrade":
                await migrate.upgrade(engine, args.revision or "head")
            else:
                await migrate.downgrade(engine, args.revision or "-1")
        finally:
            await engine.dispose()

    try:
        asyncio.run(run(url))
    finally:
        if embedded is not None:
            embedded.stop()


def _openapi(args: argparse.Namespace) -> None:
    from app.core.config import load_settings
    from app.main import create_app

    document = json.dumps(create_app(load_settings()).openapi(), indent=2, sort_keys=True) + "\n"
    if args.output:
        Path(args.output).write_text(document)
    else:
        sys.stdout.write(document)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="loopwright", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API and the engines")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port (default 8000)")
    serve.set_defaults(handler=_server_command(_serve))

    worker = commands.add_parser("worker", help="run agent loops without serving HTTP")
    worker.set_defaults(handler=_server_command(_worker))

    _add_client_verbs(commands)

    mig = commands.add_parser("migrate", help="apply or revert database migrations")
    mig.add_argument("action", choices=["upgrade", "downgrade"], nargs="?", default="upgrade")
    mig.add_argument("revision", nargs="?", help="target revision (head / -1 by default)")
    mig.set_defaults(handler=_server_command(_migrate))

    spec = commands.add_parser("openapi", help="print the OpenAPI document")
    spec.add_argument("--output", help="write to this file instead of stdout")
    spec.set_defaults(handler=_server_command(_openapi))

    parser.epilog = EXIT_CODES
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    args = parser.parse_args(argv)
    args.handler(args)


def settings_problems(exc: ValidationError | SettingsError) -> list[str]:
    """One line per wrong setting, named as it is written in the environment."""
    from pydantic_settings import SettingsError

    if isinstance(exc, SettingsError):  # a value that is not the JSON its field needs
        field = str(exc).split('"')[1] if '"' in str(exc) else ""
        prefix = f"LOOPWRIGHT_{field.upper()}"
        named = sorted(k for k in os.environ if k.startswith(prefix)) or [prefix]
        return [
            f"{', '.join(named)}: cannot be read; lists and objects are written as JSON, "
            """e.g. LOOPWRIGHT_AUTH__API_KEYS='["key-1", "key-2"]'"""
        ]
    return [
        f"LOOPWRIGHT_{'__'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
        + (f" (got {error['input']!r})" if not isinstance(error["input"], dict) else "")
        for error in exc.errors(include_url=False)
    ]


EXIT_CODES = """exit codes of the client verbs (a followed run's ending, or why it failed):
  0 completed   1 failed or dead-lettered   2 bad command line   3 cancelled
  4 timed out   5 waits on a person (no terminal to ask)   6 the server refused a request
  7 no server at the URL   130 interrupted (it goes on)"""


def _add_client_verbs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument(
        "--url",
        default=os.environ.get("LOOPWRIGHT_URL", DEFAULT_URL),
        help=f"the server (LOOPWRIGHT_URL; default {DEFAULT_URL})",
    )
    server.add_argument(
        "--api-key",
        default=os.environ.get("LOOPWRIGHT_API_KEY"),
        help="a bearer API key, if the server needs one (LOOPWRIGHT_API_KEY)",
    )

    def verb(name: str, help_text: str, handler: Verb) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text, parents=[server])
        parser.set_defaults(handler=_client_verb(handler))
        return parser

    run = verb("run", "start a run and follow it (asking its questions on a terminal)", verbs.run)
    run.add_argument("text", help="what to ask")
    run.add_argument("--agent", help="agent id or name (default: the scripted demo agent)")
    run.add_argument("--conversation", help="continue this conversation")
    run.add_argument("--lane", help="queue on this lane")
    run.add_argument(
        "--at", metavar="TIME", help="a delayed run: start no sooner than this ISO 8601 time"
    )
    run.add_argument("--detach", action="store_true", help="start it and return")

    follow = verb("follow", "follow a run's events until it settles", verbs.follow_run)
    follow.add_argument("run", help="run id")

    runs = verb("runs", "list runs, newest first", verbs.runs)
    runs.add_argument("--status", help="only runs with this status")
    runs.add_argument("--agent", help="only this agent's runs (id or name)")
    runs.add_argument("--limit", type=int, default=20, help="runs per page (default 20)")
    runs.add_argument("--cursor", help="the page after this one (printed under a full page)")
    runs.add_argument("--oldest", action="store_true", help="oldest first")

    show = verb("show", "a run and its transcript", verbs.show)
    show.add_argument("run", help="run id")

    steps = verb("history", "a run's steps (boundaries), one line each", verbs.history)
    steps.add_argument("run", help="run id")

    fork = verb("fork", "start a new run from one of a run's steps, and follow it", verbs.fork)
    fork.add_argument("run", help="run id")
    fork.add_argument("step", type=int, help="the step to start after (see `history`)")
    fork.add_argument("--input", help="a new message after that step")
    fork.add_argument("--detach", action="store_true", help="start it and return")

    for name, help_text, handler in [
        ("cancel", "cancel a run", verbs.cancel),
        ("resume", "resume a timed-out run from its checkpoint", verbs.resume),
        ("retry", "send a failed, dead-lettered or timed-out run back", verbs.retry),
    ]:
        command = verb(name, help_text, handler)
        command.add_argument("run", help="run id")
        if name != "cancel":
            command.add_argument("--follow", action="store_true", help="then follow it")

    answer = verb("answer", "answer the question a run waits on", verbs.answer)
    answer.add_argument("run", help="run id")
    answer.add_argument("text", nargs="?", help="the answer")
    answer.add_argument(
        "--retry-call", action="store_true", help="run a call cut short again (it did not happen)"
    )
    answer.add_argument("--follow", action="store_true", help="then follow the run")

    approvals = verb("approvals", "list, approve or reject approvals", verbs.approvals)
    approvals.add_argument(
        "action", nargs="?", choices=["list", "approve", "reject"], default="list"
    )
    approvals.add_argument("id", nargs="?", help="approval id (approve, reject)")
    approvals.add_argument(
        "--status", default="pending", help="list: this status (default pending)"
    )
    approvals.add_argument("--comment", help="approve: a comment")
    approvals.add_argument("--reason", help="reject: why (required)")

    tasks = verb(
        "tasks",
        "list tasks, move one on its board, route one to an agent, or coordinate one",
        coordinations.tasks,
    )
    tasks.add_argument(
        "action", nargs="?", choices=["list", "move", "route", "coordinate"], default="list"
    )
    tasks.add_argument("id", nargs="?", help="move, route, coordinate: the task's id")
    tasks.add_argument(
        "column", nargs="?", choices=boards.COLUMNS, help="move: the board column it goes to"
    )
    tasks.add_argument("--assign", metavar="WHO", help="move: who takes it (through ready)")
    tasks.add_argument("--reason", help="move: why, for its audit trail")
    tasks.add_argument("--status", help="list: only this status")
    tasks.add_argument(
        "--strategy",
        choices=[strategy.value for strategy in AssignmentStrategy],
        help="route: how to choose the agent",
    )
    tasks.add_argument("--role", help="route: the agents' role")
    tasks.add_argument(
        "--skill", action="append", help="route: a skill the agent needs (repeatable)"
    )
    tasks.add_argument("--agent", help="route: manual's agent, or hierarchical's manager")
    _add_coordinate_options(tasks)

    kanban = verb(
        "board",
        "a project's Kanban board: its columns, counts against WIP limits, and tasks",
        boards.board,
    )
    kanban.add_argument("project", help="the project")
    kanban.add_argument(
        "--limit",
        nargs=2,
        metavar=("COLUMN", "N"),
        help="first set the column's WIP limit to N (strict: a move past it is refused)",
    )
    kanban.add_argument(
        "--advisory", action="store_true", help="with --limit: past it, moves are only noted"
    )
    kanban.add_argument(
        "--no-limit", choices=boards.COLUMNS, metavar="COLUMN", help="first remove its WIP limit"
    )
    kanban.add_argument(
        "--all", action="store_true", help=f"every task shown, not the first {boards.CARDS}"
    )

    sprints.add_parser(commands, server, _client_verb)
    workspaces.add_parsers(commands, server, _client_verb)
    flows = verb(
        "workflows",
        "list workflow definitions, the built-in templates, or make a definition from one",
        workflow_verbs.workflows,
    )
    flows.add_argument(
        "action", nargs="?", choices=["list", "templates", "instantiate"], default="list"
    )
    flows.add_argument("template", nargs="?", help="instantiate: the template's name")
    flows.add_argument(
        "--name", help="instantiate: the definition's name (default: the template's)"
    )
    flows.add_argument(
        "--project",
        help="instantiate: the project it works in (its board gets the template's WIP limits "
        "where a column has none; agile_kanban opens its first sprint)",
    )
    flows.add_argument(
        "--var",
        action="append",
        metavar="NAME=VALUE",
        help="instantiate: a template variable (repeatable; see `workflows templates`)",
    )

    coordination = verb(
        "coordinations",
        "a coordination's phases and subtasks, or its events",
        coordinations.coordinations,
    )
    coordination.add_argument("action", choices=["show", "follow"])
    coordination.add_argument("id", help="coordination id")

    agents = verb("agents", "list agents, or create one from a YAML or JSON file", verbs.agents)
    agents.add_argument("action", nargs="?", choices=["list", "create"], default="list")
    agents.add_argument("file", nargs="?", help="create: the agent's file")

    verb(
        "schedules",
        "schedule triggers: cron or interval, zone, enabled, and their next fire times",
        verbs.schedules,
    )

    triggers = verb(
        "triggers",
        "list triggers, or fire a webhook trigger with a signed test delivery",
        verbs.triggers,
    )
    triggers.add_argument("action", nargs="?", choices=["list", "fire"], default="list")
    triggers.add_argument("id", nargs="?", help="fire: the webhook trigger's id")
    triggers.add_argument(
        "--kind", choices=["webhook", "schedule", "chain"], help="list: only this kind"
    )
    triggers.add_argument("--payload", default="{}", help="fire: the JSON payload (default {})")
    triggers.add_argument(
        "--secret", help=f"fire: the trigger's secret (default: ${verbs.SECRET_ENV})"
    )
    triggers.add_argument("--delivery", help="fire: a delivery id (a repeat starts nothing)")
    triggers.add_argument("--follow", action="store_true", help="fire: then follow the run")

    hooks = verb(
        "webhooks", "list webhooks, a webhook's deliveries, or redeliver one", verbs.webhooks
    )
    hooks.add_argument(
        "action", nargs="?", choices=["list", "deliveries", "redeliver"], default="list"
    )
    hooks.add_argument("webhook", nargs="?", help="webhook id (deliveries, redeliver)")
    hooks.add_argument("delivery", nargs="?", help="delivery id (redeliver)")
    hooks.add_argument(
        "--status", help="deliveries: only this status (pending, succeeded, dead_letter)"
    )
    hooks.add_argument("--limit", type=int, default=20, help="deliveries: how many (default 20)")

    costs = verb(
        "costs", "what LLM calls cost, by agent, project, task, model, day or month", verbs.costs
    )
    costs.add_argument(
        "--by",
        choices=["agent", "project", "task", "model", "day", "month"],
        default="agent",
        help="grouping",
    )
    costs.add_argument("--start", help="first day, YYYY-MM-DD (default: this month's 1st)")
    costs.add_argument("--end", help="last day, included (default: today, UTC)")

    verb("budgets", "budgets, with what each period spent and reserved", verbs.budgets)

    tools = verb("tools", "the tools agents may use, with their inputs", verbs.tools)
    tools.add_argument("--schemas", action="store_true", help="print full input schemas")


def _add_coordinate_options(tasks: argparse.ArgumentParser) -> None:
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


if __name__ == "__main__":
    main()
