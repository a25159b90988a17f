"""A real OTLP/HTTP collector for tests of other processes' traces: it decodes the protobuf
export requests that `POST /v1/traces` receives (as an OpenTelemetry Collector would), and
records the headers of any other request (a tool's call to it)."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SAFETY_S = 60.0  # reached only when the code under test is broken


@dataclass(frozen=True)
class ExportedSpan:
    service: str  # the exporting process's `service.name`
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


class Collector:
    def __init__(self) -> None:
        self.url = ""
        self.spans: list[ExportedSpan] = []
        self.requests: list[dict[str, str]] = []  # the headers of the other requests
        self._lock = threading.Lock()

    def receive(self, path: str, headers: dict[str, str], body: bytes) -> bytes:
        if path != "/v1/traces":
            with self._lock:
                self.requests.append(headers)
            return b"ok"
        if headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    parent = span.parent_span_id.hex() or None
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    found.append(
                        ExportedSpan(
                            str(resource.get("service.name")),
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            parent,
                            attributes,
                        )
                    )
        with self._lock:
            self.spans += found
        answer: bytes = ExportTraceServiceResponse().SerializeToString()
        return answer

    def wait_for(
        self, found: Callable[[list[ExportedSpan]], bool], timeout_s: float = SAFETY_S
    ) -> list[ExportedSpan]:
        """The spans received, once `found` says they are complete (other processes export
        them in their own time: waited for)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            assert time.monotonic() < deadline, [s.name for s in spans]
            time.sleep(0.05)  # other processes' exports: nothing to inject


@contextmanager
def collector() -> Iterator[Collector]:
    """A `Collector` on a free loopback port, served by a thread."""
    found = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = found.receive(self.path, headers, body)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-collector", daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
