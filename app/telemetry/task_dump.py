"""`kill -USR1 <pid>`: a `serve` or `worker` process logs where each of its asyncio tasks
waits, and goes on. A process that is up but makes no progress shows nothing to a thread
profiler (its one thread idles in the event loop); its tasks' stacks say what each awaits."""

from __future__ import annotations

import asyncio
import logging
import reprlib
import signal
import threading

log = logging.getLogger(__name__)

HEADER = "asyncio tasks of this process"


def install(loop: asyncio.AbstractEventLoop) -> None:
    """On the main thread's loop only (signals reach that thread; an app served from
    another thread, as in the tests, has none)."""
    if threading.current_thread() is threading.main_thread():
        loop.add_signal_handler(signal.SIGUSR1, dump)


def remove(loop: asyncio.AbstractEventLoop) -> None:
    if threading.current_thread() is threading.main_thread():
        loop.remove_signal_handler(signal.SIGUSR1)


def dump() -> None:
    """One record: each task's name and the chain of awaits it is suspended in, innermost
    last (a task's own stack would show only its outermost coroutine)."""
    tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    lines = []
    for task in tasks:
        lines.append(f"--- {task.get_name()}")
        lines.extend(_awaits(task.get_coro()))
    log.warning("%s (%d):\n%s", HEADER, len(tasks), "\n".join(lines))


def _awaits(awaitable: object) -> list[str]:
    lines = []
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is None:  # not a coroutine: what the innermost one waits on
            lines.append(f"    waiting on {reprlib.repr(awaitable)}")
            break
        code = frame.f_code
        lines.append(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
    return lines
