"""A run's trace across processes and a crash: the API process creates the run under the
caller's `traceparent`; a worker process runs its first turn (its `http_request` carries the
trace to the callee) and is SIGKILLed; another worker process resumes it. Every process
exports over OTLP/HTTP, configured by the standard variables alone, to a collector in the
test, which decodes what they send: the resumed execution's spans are children of the
request that created the run, in the caller's trace."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.cluster import Cluster
from tests.support.factories import scripted_agent
from tests.support.otlp import ExportedSpan, collector

pytestmark = pytest.mark.e2e

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


def _wait(http: httpx.Client, run_id: str, status: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run: dict[str, Any] = http.get(f"/v1/runs/{run_id}").json()
        if run["status"] == status:
            return run
        assert time.monotonic() < deadline, run["status"]
        time.sleep(0.1)  # watching other processes; nothing to inject


def _executions(spans: list[ExportedSpan]) -> list[ExportedSpan]:
    return [s for s in spans if s.name.startswith("invoke_agent")]


def test_a_resumed_run_joins_the_trace_of_the_request_that_created_it(
    database_url: str, clean_db: AsyncEngine, tmp_path: Path
) -> None:
    with collector() as otlp:
        env = {
            "LOOPWRIGHT_WORKERS__LEASE_TTL_S": "1",
            "LOOPWRIGHT_WORKERS__POLL_INTERVAL_S": "0.2",
            "LOOPWRIGHT_RECONCILER__INTERVAL_S": "0.5",
            "LOOPWRIGHT_TOOLS__HTTP_ALLOWED_NETWORKS": '["127.0.0.0/8"]',
            # Tracing, as an operator turns it on: an OTLP endpoint.
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: spans leave soon after they end
        }
        with Cluster(database_url, tmp_path, env) as cluster:
            api = cluster.server(env={"OTEL_SERVICE_NAME": "lw-api"})
            worker = {"OTEL_SERVICE_NAME": "lw-worker"}
            with httpx.Client(base_url=api.url, timeout=30) as http:
                call = {"url": f"{otlp.url}/hook", "method": "POST"}
                script = [{"tool_calls": [{"name": "http_request", "input": call}]}, {"text": "ok"}]
                agent = scripted_agent(
                    http, "traced", script, tools=["http_request"], auto_approve=["http_request"]
                )
                run = http.post(
                    "/v1/runs",
                    json={"agent_id": agent["id"], "input": "go"},
                    headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                ).json()
                crash = {**worker, "LOOPWRIGHT_CRASH_AT": "after_tool_result"}
                doomed = cluster.worker("doomed", crash, await_ready=False)
                assert doomed.wait() == -9, "the crash point was not reached"
                healthy = cluster.worker("healthy", worker)
                final = _wait(http, run["id"], "completed")
            # A worker stopped with SIGTERM exports what it still holds before it exits.
            assert healthy.terminate_and_wait() == 0, healthy.log()
            spans = otlp.wait_for(lambda found: bool(_executions(found)))
        spans = otlp.wait_for(lambda found: any(s.name == "POST /v1/runs" for s in found))

    [request] = [s for s in spans if s.name == "POST /v1/runs"]
    assert (request.service, request.trace_id, request.parent_id) == (
        "lw-api",
        CALLER_TRACE,
        CALLER_SPAN,
    )
    assert final["trace_id"] == CALLER_TRACE

    # The killed worker's execution never ended, so only the resumed one was exported: a
    # child of the request, in another process, after the crash.
    [resumed] = _executions(spans)
    assert resumed.service == "lw-worker"
    assert (resumed.trace_id, resumed.parent_id) == (CALLER_TRACE, request.span_id)
    assert resumed.attributes["loopwright.run.id"] == run["id"]
    assert resumed.attributes["loopwright.run.status"] == "completed"
    [turn] = [s for s in spans if s.name == "turn" and s.parent_id == resumed.span_id]
    assert turn.attributes["loopwright.turn"] == 2  # the first was done before the crash
    [chat] = [s for s in spans if s.parent_id == turn.span_id]
    assert chat.name == "chat scripted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    # Whatever the killed worker exported before it died is in the trace too (group commits
    # are roots of their own: they serve many runs at once).
    runs = [s for s in spans if s.service == "lw-worker" and not s.name.startswith("group_commit")]
    assert {s.trace_id for s in runs} == {CALLER_TRACE}

    # The tool call of the first execution carried the trace to the service it called.
    [called] = otlp.requests
    assert called["traceparent"].startswith(f"00-{CALLER_TRACE}-")
