"""`kill -USR1` makes a process log where each of its asyncio tasks waits."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from app.telemetry import task_dump


class _Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.heard = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.heard.set()


async def test_sigusr1_logs_each_task_and_what_it_awaits() -> None:
    loop = asyncio.get_running_loop()
    waiter = asyncio.create_task(asyncio.Event().wait(), name="waits-for-ever")
    heard = _Heard()
    task_dump.log.addHandler(heard)
    task_dump.install(loop)
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(heard.heard.wait(), 5)  # the handler runs on this loop
    finally:
        task_dump.remove(loop)
        task_dump.log.removeHandler(heard)
        waiter.cancel()
    [record] = heard.records
    message = record.getMessage()
    assert message.startswith(task_dump.HEADER)
    assert "--- waits-for-ever" in message
    assert "in wait\n" in message  # the await it is suspended in: Event.wait
