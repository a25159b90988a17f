"""`create_app(settings)`: the HTTP application of a process, whose lifespan runs the
process's components (`app/wiring.py` builds, starts and stops them)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

from app.agents import api as agents
from app.approvals import api as approvals
from app.banner import banner
from app.coordination import api as coordinations
from app.core.config import Settings, load_settings
from app.costs.api import budgets, costs
from app.dashboard import pages as ui
from app.dashboard.page import Page
from app.http import docs, health, problems
from app.http import metrics as metrics_api
from app.http.body_limit import BodyLimit
from app.http.connections import ConnectionAborts
from app.http.input_guard import InputGuard
from app.http.local_guard import LocalGuard
from app.http.openapi import build_openapi, operation_id
from app.http.request_ids import install_request_ids
from app.runs.api import runs as runs_api
from app.runs.api import tools as tools_api
from app.runs.tools.base import Tool
from app.sprints import api as sprints
from app.tasks.api import boards, tasks
from app.telemetry import task_dump, tracing
from app.triggers.api import hooks, triggers
from app.webhooks import api as webhooks
from app.wiring import ComponentFactory, running
from app.workflows.api import workflow_executions, workflow_templates, workflows
from app.workspaces import api as workspaces

log = logging.getLogger(__name__)

DESCRIPTION = """\
Loopwright runs LLM agent loops and task workflows durably on Postgres and streams what
they do over Server-Sent Events.

Errors are RFC 9457 problem documents (`application/problem+json`) with a stable `code`.
Lists are paginated by cursor: pass `next_cursor` back as `cursor`.
"""


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    loop = asyncio.get_running_loop()
    task_dump.install(loop)
    try:
        async with running(
            app.state.settings, app.state.tools, components=app.state.components
        ) as runtime:
            app.state.runtime = runtime
            app.state.services = runtime.services
            if app.state.announce:
                log.info(banner(app.state.settings))
            yield
    finally:
        task_dump.remove(loop)
        # Once every component stopped (a run handed back ended its span): what is queued
        # is exported, off the event loop (an exporter may wait on its collector).
        if tracing.enabled():
            await asyncio.to_thread(tracing.stop)


def create_app(
    settings: Settings | None = None,
    *,
    tools: Sequence[Tool] = (),
    pages: Sequence[Page] = (),
    components: Sequence[ComponentFactory] = (),
    announce: bool = False,
) -> FastAPI:
    """The application; `tools` are added to the built-in ones for the run workers, `pages`
    to the dashboard's, and `components` (background components made from the services) to
    the process's own; `announce`: say where to go once it is ready (`loopwright serve`)."""
    settings = settings or load_settings()
    app = FastAPI(
        title="Loopwright",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=_lifespan,
        generate_unique_id_function=operation_id,
        openapi_url=None,  # served by app/http/docs.py, behind the API key when keys are set
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.tools = list(tools)
    app.state.components = list(components)
    app.state.announce = announce
    problems.install(app)
    # Outermost last: request ids see every response; the guard reads the bounded body.
    app.add_middleware(InputGuard)
    app.add_middleware(BodyLimit, max_body_bytes=settings.server.max_body_bytes)
    keys_required = bool(settings.auth.api_keys)
    if not keys_required:  # the key's stand-in, against other sites' pages
        app.add_middleware(LocalGuard, allowed_hosts=settings.server.allowed_hosts)
    install_request_ids(app)
    if tracing.configure():  # before the wrapper below: it must find Starlette's own stack
        _traced(app)
    _outside_everything(app, ConnectionAborts)
    app.include_router(health.router)
    app.include_router(docs.router)
    app.mount(docs.ASSETS_URL, docs.assets(), name="docs-assets")
    app.include_router(metrics_api.router)
    app.include_router(tasks.router)
    app.include_router(boards.router)
    app.include_router(agents.router)
    app.include_router(runs_api.router)
    app.include_router(workflows.router)
    app.include_router(workflow_executions.router)
    app.include_router(workflow_templates.router)
    app.include_router(coordinations.router)
    app.include_router(approvals.router)
    app.include_router(triggers.router)
    app.include_router(hooks.router)
    app.include_router(tools_api.router)
    app.include_router(webhooks.router)
    app.include_router(costs.router)
    app.include_router(budgets.router)
    app.include_router(sprints.router)
    app.include_router(sprints.projects)
    app.include_router(workspaces.projects)
    app.include_router(workspaces.router)
    ui.install(app, (*ui.PAGES, *pages))  # the dashboard at /ui; / leads there
    app.openapi = lambda: build_openapi(app, keys_required=keys_required)  # type: ignore[method-assign]
    return app


# Not traced: probes and scrapes, and static files. OTEL_PYTHON_FASTAPI_EXCLUDED_URLS (or
# OTEL_PYTHON_EXCLUDED_URLS), comma-separated regular expressions, replaces the list.
UNTRACED_URLS = "/healthz,/readyz,/metrics,/ui/static/,/docs/assets/"


def _traced(app: FastAPI) -> None:
    """A server span for every request (OpenTelemetry's FastAPI instrumentation; its
    per-message `send`/`receive` spans left out: a stream would make thousands), a child of
    the caller's `traceparent` when it sent one."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    configured = any(
        os.environ.get(name)
        for name in ("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS", "OTEL_PYTHON_EXCLUDED_URLS")
    )
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.state.provider,
        excluded_urls=None if configured else UNTRACED_URLS,
        exclude_spans=["receive", "send"],
    )


def _outside_everything(app: FastAPI, middleware: Callable[[ASGIApp], ASGIApp]) -> None:
    """Wraps the whole stack, Starlette's own error middleware included, so that the
    middleware receives the server's `send` itself."""
    build = app.build_middleware_stack

    def wrapped() -> ASGIApp:
        return middleware(build())

    app.build_middleware_stack = wrapped  # type: ignore[method-assign]
