"""The `loopwright` command: `serve`, `worker`, `run`, `runs`, `migrate`, `openapi`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from pydantic import ValidationError

from app.client import Client, follow
from app.core.config import Settings, load_settings
from app.core.process import tune_gc
from app.telemetry.logs import configure_logging


def _settings(args: argparse.Namespace) -> Settings:
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

    from app.main import create_app

    settings = _settings(args)
    configure_logging(settings.log_level, settings.log_format)
    app = create_app(settings, announce=True)
    tune_gc()
    uvicorn.run(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_level=settings.log_level.lower(),
        # uvicorn's own logging config would give its loggers plain-text handlers; without
        # it they propagate to ours: JSON, one access line per response with its request id.
        log_config=None,
        timeout_graceful_shutdown=int(settings.task_engine.drain_timeout_s) + 5,
    )


def _worker(args: argparse.Namespace) -> None:
    """Run workers without serving HTTP: the same composition root, minus the server."""
    import signal

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


def _client(args: argparse.Namespace) -> Client:
    return Client(args.url, args.api_key)


def _run(args: argparse.Namespace) -> None:
    client = _client(args)
    try:
        agent_id = args.agent or client.demo_agent_id()
        run = client.start(agent_id, args.text, args.conversation)
        print(f"run {run['id']} on lane {run['lane']} ({run['status']})")
        status = follow(client, run["id"])
    finally:
        client.close()
    raise SystemExit(0 if status in ("completed", "waiting_on_human") else 1)


def _runs(args: argparse.Namespace) -> None:
    client = _client(args)
    try:
        for run in client.runs(args.status):
            print(f"{run['id']}  {run['status']:<17} {run['lane']:<45} {run['created_at']}")
    finally:
        client.close()


def _migrate(args: argparse.Namespace) -> None:
    from app.store import migrate
    from app.store.db import make_engine
    from app.store.embedded_pg import start_embedded

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
    serve.set_defaults(handler=_serve)

    worker = commands.add_parser("worker", help="run agent loops without serving HTTP")
    worker.set_defaults(handler=_worker)

    for name, help_text, handler in [
        ("run", "start a run and follow its events", _run),
        ("runs", "list runs", _runs),
    ]:
        verb = commands.add_parser(name, help=help_text)
        verb.add_argument("--url", default="http://127.0.0.1:8000", help="the server")
        verb.add_argument("--api-key", help="a bearer API key, if the server needs one")
        verb.set_defaults(handler=handler)
        if name == "run":
            verb.add_argument("text", help="what to ask")
            verb.add_argument("--agent", help="agent id (default: the scripted demo agent)")
            verb.add_argument("--conversation", help="continue this conversation")
        else:
            verb.add_argument("--status", help="only runs with this status")

    mig = commands.add_parser("migrate", help="apply or revert database migrations")
    mig.add_argument("action", choices=["upgrade", "downgrade"], nargs="?", default="upgrade")
    mig.add_argument("revision", nargs="?", help="target revision (head / -1 by default)")
    mig.set_defaults(handler=_migrate)

    spec = commands.add_parser("openapi", help="print the OpenAPI document")
    spec.add_argument("--output", help="write to this file instead of stdout")
    spec.set_defaults(handler=_openapi)

    args = parser.parse_args(argv)
    try:
        args.handler(args)
    except ValidationError as exc:
        parser.exit(2, f"loopwright: invalid settings:\n{exc}\n")


if __name__ == "__main__":
    main()
