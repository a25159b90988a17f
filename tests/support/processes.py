"""Runs `loopwright` as a real child process for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.telemetry import task_dump

LOOPWRIGHT = str(Path(sys.executable).parent / "loopwright")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def coverage_env() -> dict[str, str]:
    """Coverage's variables, when the suite runs under it (`make test`), so that a child
    given an environment of its own measures itself as well."""
    return {k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")}


class ServerProcess:
    """`loopwright serve` on a free port, with the environment given (and nothing of ours
    but coverage's)."""

    command = "serve"

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "LOOPWRIGHT_SERVER__PORT": str(self.port),
            **coverage_env(),
            **env,
        }
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout_s: float = 60.0) -> None:
        self.spawn()
        self._await_ready(ready_timeout_s)

    def spawn(self) -> None:
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [LOOPWRIGHT, self.command], env=self._env, stdout=log, stderr=subprocess.STDOUT
            )

    def _await_ready(self, ready_timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # polling a child process's readiness; there is no clock to inject
        raise RuntimeError(f"server not ready in {ready_timeout_s}s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)

    def terminate(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM; True when the process shut down gracefully (uvicorn re-raises the
        signal once its shutdown is complete, so the exit status is -SIGTERM)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout_s)
        return code in (0, -signal.SIGTERM) and "Application shutdown complete" in self.log()

    def terminate_and_wait(self, timeout_s: float = 30.0) -> int | None:
        """Stops it (None when it was never spawned, so a clean-up after an early failure
        does not hide that failure); its exit status when it had ended already."""
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGCONT)  # a frozen process would not act on SIGTERM
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)

    def wait(self, timeout_s: float = 60.0) -> int:
        """Its exit status once it ends by itself (-9: SIGKILLed, as at a crash point)."""
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"still running after {timeout_s} s:\n{self.log()}\n{self.tasks()}"
            ) from None

    def tasks(self, timeout_s: float = 5.0) -> str:
        """Where each of its asyncio tasks waits (SIGUSR1: `app/telemetry/task_dump.py`)."""
        assert self.process is not None
        before = self.log_path.read_text(errors="replace").count(task_dump.HEADER)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            if text.count(task_dump.HEADER) > before:
                line = text[text.rindex("\n", 0, text.rindex(task_dump.HEADER)) + 1 :]
                with contextlib.suppress(ValueError):  # a JSON log line: its message
                    return str(json.loads(line.splitlines()[0])["message"])
                return line
            time.sleep(0.1)  # polling a child process's log; there is no clock to inject
        return "(no task dump)"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


class WorkerProcess(ServerProcess):
    """`loopwright worker`: agent loops without HTTP; ready once it says so in its log."""

    command = "worker"
    _boots_before = 0  # times "worker running" was in the log when the process was spawned

    def _boots(self) -> int:
        return self.log_path.read_text().count("worker running") if self.log_path.exists() else 0

    def spawn(self) -> None:
        self._boots_before = self._boots()
        super().spawn()

    @property
    def ready(self) -> bool:
        """The process spawned last is up and working (it has said so), and still alive."""
        alive = self.process is not None and self.process.poll() is None
        return alive and self._boots() > self._boots_before

    def start(self, ready_timeout_s: float = 60.0) -> None:
        self.spawn()
        deadline = time.monotonic() + ready_timeout_s
        while not self.ready:
            assert self.process is not None
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{self.log()}")
            time.sleep(0.1)
