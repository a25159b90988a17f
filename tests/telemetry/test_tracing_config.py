"""Which `OTEL_*` variables turn tracing on, and what tracing costs when it is off: every
helper answers with a shared no-op or what it was given, without reading any context."""

from __future__ import annotations

import os
import re

import pytest

from app.telemetry import spans, tracing
from app.telemetry.tracing import TracingMisconfigured, exporters

OTLP = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


@pytest.mark.parametrize(
    ("environ", "chosen"),
    [
        ({}, ()),  # off unless configured
        ({"OTEL_SERVICE_NAME": "lw", "OTEL_TRACES_SAMPLER": "always_on"}, ()),
        (OTLP, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "OTLP,otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "none", **OTLP}, ()),  # an endpoint alone does not win
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, ()),
        ({**OTLP, "OTEL_SDK_DISABLED": " TRUE "}, ()),
        ({**OTLP, "OTEL_SDK_DISABLED": "false"}, ("otlp",)),
        ({**OTLP, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, ("otlp",)),
        # Only the traces' own protocol matters to a traces exporter.
        (
            {
                **OTLP,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            ("otlp",),
        ),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ("console",)),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_configured(
    environ: dict[str, str], chosen: tuple[str, ...]
) -> None:
    assert exporters(environ) == chosen


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "unknown exporter 'zipkin' (otlp, console or none)"),
        ({"OTEL_TRACES_EXPORTER": "none,console"}, "`none` cannot be combined"),
        ({**OTLP, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "'grpc' is not supported"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json"),
    ],
)
def test_a_configuration_it_cannot_serve_is_refused_at_start(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(TracingMisconfigured, match=re.escape(message)):
        exporters(environ)


async def _sink(event_type: str, data: dict[str, object]) -> None:
    return None


async def _data_sink(data: dict[str, object]) -> None:
    return None


def test_with_tracing_off_every_helper_is_a_shared_no_op() -> None:
    assert not tracing.enabled()
    assert spans.chat("anthropic", "m", 10) is spans.NO_SPAN
    assert spans.execute_tool("echo", "toolu_1") is spans.NO_SPAN
    assert spans.group_commit("c", []) is spans.NO_SPAN
    assert spans.with_events(_sink) is _sink  # the events go where they went, nothing more
    assert spans.with_event("agent.tool.retry", _data_sink) is _data_sink
    assert spans.link_here() is None
    assert tracing.carrier() is None
    headers = {"traceparent": "given by the model"}
    tracing.inject(headers)
    assert headers == {"traceparent": "given by the model"}
    with spans.NO_SPAN as span:
        assert not span.recording


@pytest.mark.parametrize(("service", "named"), [(None, "loopwright"), ("lw-eu", "lw-eu")])
def test_the_process_configures_tracing_once_and_shuts_it_down_when_it_stops(
    monkeypatch: pytest.MonkeyPatch, service: str | None, named: str
) -> None:
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    if service is not None:
        monkeypatch.setenv("OTEL_SERVICE_NAME", service)
    assert tracing.configure()
    try:
        provider = tracing.state.provider
        assert provider is not None
        assert provider.resource.attributes["service.name"] == named
        assert tracing.configure() and tracing.state.provider is provider  # once
    finally:
        tracing.stop()
    assert not tracing.enabled() and tracing.state.provider is None
