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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.agents import cli as agents
from app.approvals import cli as approvals
from app.client.commands import Handler, Resource
from app.coordination import cli as coordinations
from app.core.net import listening_socket
from app.core.process import tune_gc
from app.costs import cli as costs
from app.runs.cli import runs, tools
from app.sprints import cli as sprints
from app.tasks import cli as tasks
from app.telemetry.logs import configure_logging
from app.telemetry.tracing import TracingMisconfigured
from app.triggers import cli as triggers
from app.webhooks import cli as webhooks
from app.workflows import cli as workflows
from app.workspaces import cli as workspaces

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from app.core.config import Settings

# The client's resources, each a module whose `register(commands)` adds its verbs
# (app/client/commands.py), in the order `loopwright --help` lists them.
RESOURCES: tuple[Resource, ...] = (
    runs,  # run, follow, runs, show, history, fork, cancel, resume, retry, answer
    approvals,
    tasks,  # tasks, board
    sprints,
    workspaces,  # workspace, worktrees
    workflows,
    coordinations,
    agents,
    triggers,  # schedules, triggers
    webhooks,
    costs,  # costs, budgets
    tools,
)


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


def main(argv: list[str] | None = None, resources: Sequence[Resource] = RESOURCES) -> None:
    """Run `loopwright ARGV`; `resources` are the client's (a test adds its own)."""
    parser = argparse.ArgumentParser(prog="loopwright", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the API and the engines")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port (default 8000)")
    serve.set_defaults(handler=_server_command(_serve))

    worker = commands.add_parser("worker", help="run agent loops without serving HTTP")
    worker.set_defaults(handler=_server_command(_worker))

    for resource in resources:
        resource.register(commands)

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


if __name__ == "__main__":
    main()
