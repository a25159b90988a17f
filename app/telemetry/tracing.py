"""Traces (OpenTelemetry): whether a process traces, with which provider, and the W3C trace
context it carries across processes. Off unless the standard `OTEL_*` variables name an
exporter; the spans themselves are `app/telemetry/spans.py`'s.

A run stores the W3C context of the span that created it (`runs.trace_context`: an API
request's, or the tool call's of the run that spawned it; `carrier()`), so that the spans
of every execution of it are children of that span, in whichever process claims it and
after any number of resumes. `http_request` sends its tool call's context on (`inject()`).

The SDK is imported only when tracing is configured. Tests point the module at a provider
of their own with `install()`: the process's global tracer provider is never set (it can
be set once only, and FastAPI would trace every request natively if it were).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

EXPORTERS = ("otlp", "console")
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
SERVICE_NAME = "loopwright"


@dataclass
class _State:
    """The process's tracing: `tracer` None means off (what every hot-path check reads)."""

    tracer: Tracer | None = None
    provider: TracerProvider | None = None
    propagator: TraceContextTextMapPropagator | None = None
    owned: bool = False  # built here from the environment: shut down when the process stops


state = _State()


class TracingMisconfigured(ValueError):
    """An `OTEL_*` variable asks for something this service cannot do."""


def exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the `OTEL_*` variables ask for; none: tracing is off.

    Off unless configured: `OTEL_TRACES_EXPORTER` (`otlp`, `console`, both comma-separated,
    or `none`) or, without it, an OTLP endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    `OTEL_EXPORTER_OTLP_ENDPOINT`) turns it on; `OTEL_SDK_DISABLED=true` keeps it off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if named:
        chosen = tuple(dict.fromkeys(n.strip() for n in named.split(",") if n.strip()))
        unknown = [n for n in chosen if n not in (*EXPORTERS, "none")]
        if unknown:
            raise TracingMisconfigured(
                f"OTEL_TRACES_EXPORTER: unknown exporter {unknown[0]!r} (otlp, console or none)"
            )
        if "none" in chosen:
            if len(chosen) > 1:
                raise TracingMisconfigured("OTEL_TRACES_EXPORTER: `none` cannot be combined")
            return ()
    elif environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    ):
        chosen = ("otlp",)
    else:
        return ()
    if "otlp" in chosen:
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        if protocol.strip() != "http/protobuf":
            raise TracingMisconfigured(
                f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported; traces are "
                "exported over OTLP/HTTP (http/protobuf, port 4318)"
            )
    return chosen


def configure() -> bool:
    """Once per process (the composition root calls it): tracing as the environment
    configures it, unless a provider is installed already. True when tracing is on."""
    if state.tracer is not None:
        return True
    chosen = exporters(os.environ)
    if not chosen:
        return False
    install(_provider_for(chosen), owned=True)
    return True


def _provider_for(chosen: Iterable[str]) -> TracerProvider:
    """A provider whose resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`) and sampler
    (`OTEL_TRACES_SAMPLER`) the SDK reads from the environment, exporting in batches
    (`OTEL_BSP_*`) to each exporter chosen (OTLP's endpoint, headers and timeout: its own
    `OTEL_EXPORTER_OTLP_*` variables)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for name in chosen:
        exporter: SpanExporter
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        else:  # one line of JSON per span, on stdout (the logs go to stderr)
            exporter = ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def install(provider: TracerProvider, *, owned: bool = False) -> None:
    """Trace with `provider` from now on (tests install one with an in-memory exporter).
    `owned`: `stop()` shuts it down; otherwise it only flushes it."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    state.propagator = TraceContextTextMapPropagator()
    state.provider, state.owned = provider, owned
    state.tracer = provider.get_tracer("loopwright")


def uninstall() -> None:
    """Tracing off again (the provider is left as it is)."""
    state.tracer, state.provider, state.owned = None, None, False


def stop() -> None:
    """When the process stops: the spans still queued are exported, and a provider built
    from the environment is shut down (tracing is then off)."""
    provider = state.provider
    if provider is None:
        return
    if state.owned:
        uninstall()
        provider.shutdown()
    else:
        provider.force_flush()


def enabled() -> bool:
    return state.tracer is not None


def carrier() -> dict[str, str] | None:
    """The W3C context (`traceparent`, `tracestate`) of the current span, to store with
    what is created now; None when tracing is off or no span is current."""
    if state.tracer is None or state.propagator is None:
        return None
    found: dict[str, str] = {}
    state.propagator.inject(found)
    return found or None


def inject(headers: MutableMapping[str, str]) -> None:
    """The current span's `traceparent` (and `tracestate`) in an outgoing request's
    `headers`, replacing any given there; nothing when tracing is off."""
    if state.tracer is None or state.propagator is None:
        return
    for name in [k for k in headers if k.lower() in TRACE_HEADERS]:
        del headers[name]
    state.propagator.inject(headers)


def parent(trace_context: Mapping[str, str] | None) -> Context:
    """The context stored spans are children of (a root's, when none was stored)."""
    from opentelemetry.context import Context

    if not trace_context or state.propagator is None:
        return Context()
    return state.propagator.extract(dict(trace_context))
