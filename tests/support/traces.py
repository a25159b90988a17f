"""Spans recorded in the test process: the SDK's in-memory exporter behind a provider the
tracing module is pointed at (`tracing.install`), and a way to wait for spans that end in
other tasks (a run's span ends after the commit a client waited for)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.telemetry import tracing

SAFETY_S = 20.0  # reached only when the code under test is broken: fail, do not hang


class _Ended(SpanProcessor):
    """Wakes the waiters each time a span ends (in the event loop's thread or another)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.event = asyncio.Event()

    def on_end(self, span: ReadableSpan) -> None:
        self._loop.call_soon_threadsafe(self.event.set)


class Spans:
    def __init__(self, exporter: InMemorySpanExporter, ended: _Ended) -> None:
        self.exporter = exporter
        self._ended = ended

    @property
    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.finished if s.name.startswith(prefix)]

    async def wait_for(
        self, found: Callable[[Sequence[ReadableSpan]], bool], timeout_s: float = SAFETY_S
    ) -> list[ReadableSpan]:
        """The finished spans, once `found` says they are complete."""
        async with asyncio.timeout(timeout_s):
            while not found(self.finished):
                self._ended.event.clear()
                if found(self.finished):
                    break
                await self._ended.event.wait()
        return self.finished


@contextmanager
def recorded_spans() -> Iterator[Spans]:
    """Tracing on in this process, into memory, for the life of the block."""
    exporter = InMemorySpanExporter()
    ended = _Ended(asyncio.get_running_loop())
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(ended)
    tracing.install(provider)
    try:
        yield Spans(exporter, ended)
    finally:
        tracing.uninstall()
        provider.shutdown()


def hex_id(value: int, digits: int) -> str:
    return format(value, f"0{digits}x")
