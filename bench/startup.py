"""Start-up time, each measured in fresh subprocesses, several times: importing `app.main`
(and the heaviest imports under it, from `-X importtime`), `loopwright serve` from launch
until `/healthz` answers on an already migrated scratch database (a restart) and from
SIGTERM until it exits, and the command line without a server (`--help`, and a client verb
against a port where nothing listens).

Each row gives the wall time (p50, max) and the CPU time the process used (p50): on a busy
machine the wall time mostly measures the neighbours, the CPU time what start-up costs. The
first launch of each kind is a warm-up, untimed: it migrates the scratch database and brings
the files into the page cache, so that every timed launch is a warm restart."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
from common import admin, free_port, log, percentile, with_database

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
LOOPWRIGHT = str(Path(sys.executable).with_name("loopwright"))
POLL_S = 0.01
SERVE_TIMEOUT_S = 60.0
IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_s(pid: int) -> float:
    """User and system time of a live process, from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(command: Sequence[str], expect: int = 0) -> Sample:
    """Launch to exit of a command that must exit with `expect`."""
    cpu = _children_cpu_s()
    started = time.perf_counter()
    result = subprocess.run(command, check=False, capture_output=True, text=True)
    sample = Sample(time.perf_counter() - started, _children_cpu_s() - cpu)
    if result.returncode != expect:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}:\n{result.stderr}")
    return sample


def repeat(runs: int, measure: Callable[[], Sample]) -> list[Sample]:
    measure()  # warm-up
    return [measure() for _ in range(runs)]


def serve_once(database_url: str) -> tuple[Sample, Sample]:
    """Launch of `loopwright serve` until `/healthz` answers 200 (with the CPU it used so
    far), and SIGTERM until it exits."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "LOOPWRIGHT_LOG_FORMAT": "json",
        "LOOPWRIGHT_LOG_LEVEL": "WARNING",
    }
    with tempfile.TemporaryFile("w+") as errors:
        started = time.perf_counter()
        server = subprocess.Popen(
            [LOOPWRIGHT, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            if not _answers_healthz(server, port, started):
                errors.seek(0)
                raise RuntimeError(f"serve did not answer /healthz:\n{errors.read()}")
            ready = Sample(time.perf_counter() - started, _process_cpu_s(server.pid))
            lived_cpu, reaped_cpu = _process_cpu_s(server.pid), _children_cpu_s()
            stopping = time.perf_counter()
            server.send_signal(signal.SIGTERM)
            server.wait(SERVE_TIMEOUT_S)
            # Reaping adds the server's whole life to our children's time: keep its end.
            stop_cpu = _children_cpu_s() - reaped_cpu - lived_cpu
            return ready, Sample(time.perf_counter() - stopping, stop_cpu)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()


def _answers_healthz(server: subprocess.Popen[bytes], port: int, started: float) -> bool:
    """Polls until /healthz answers 200 (True), or the server exits or times out (False)."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=2) as http:
        while server.poll() is None and time.perf_counter() - started < SERVE_TIMEOUT_S:
            try:
                if http.get("/healthz").status_code == 200:
                    return True
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(POLL_S)
    return False


def serve_samples(server_url: str, runs: int) -> tuple[list[Sample], list[Sample]]:
    name = f"lw_startup_{secrets.token_hex(4)}"
    asyncio.run(admin(server_url, f'CREATE DATABASE "{name}"'))
    try:
        database_url = with_database(server_url, name)
        serve_once(database_url)  # warm-up: migrates the database
        measured = [serve_once(database_url) for _ in range(runs)]
    finally:
        asyncio.run(admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return [ready for ready, _ in measured], [stop for _, stop in measured]


def import_costs(runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median cumulative seconds per module, and median own seconds per top-level package
    (its modules' own times added up), over runs of `python -X importtime -c "import
    app.main"`."""
    cumulative: dict[str, list[float]] = defaultdict(list)
    by_package: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import app.main"],
            capture_output=True,
            text=True,
            check=True,
        )
        package_own: dict[str, float] = defaultdict(float)
        for own_us, cumulative_us, _, module in IMPORTTIME.findall(result.stderr):
            cumulative[module].append(int(cumulative_us) / 1e6)
            package_own[module.split(".")[0]] += int(own_us) / 1e6
        for package, seconds in package_own.items():
            by_package[package].append(seconds)
    return (
        {module: statistics.median(values) for module, values in cumulative.items()},
        {package: statistics.median(values) for package, values in by_package.items()},
    )


def row(label: str, samples: Sequence[Sample]) -> str:
    wall = sorted(s.wall_s for s in samples)
    cpu = sorted(s.cpu_s for s in samples)
    return (
        f"  {label:<40} {percentile(wall, 0.5):6.3f} {max(wall):6.3f}   {percentile(cpu, 0.5):6.3f}"
    )


def _top(costs: dict[str, float], count: int) -> str:
    ranked = sorted(costs.items(), key=lambda item: -item[1])[:count]
    return "\n".join(f"  {seconds * 1000:7.1f} ms  {name}" for name, seconds in ranked)


def main(args: argparse.Namespace) -> None:
    server_url = os.environ.get("TEST_DATABASE_URL", DEFAULT_SERVER)
    python = sys.executable
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: the verb exits 7 at once
    log(f"startup: {args.runs} runs of each, after a warm-up")
    commands: list[tuple[str, list[str], int]] = [
        ("python -c pass (the interpreter)", [python, "-c", "pass"], 0),
        ("import app.main", [python, "-c", "import app.main"], 0),
        ("import app.cli", [python, "-c", "import app.cli"], 0),
        ("loopwright --help", [LOOPWRIGHT, "--help"], 0),
        ("loopwright runs (no server at the URL)", [LOOPWRIGHT, "runs", "--url", closed], 7),
    ]
    rows = [
        row(label, repeat(args.runs, partial(timed, command, expect)))
        for label, command, expect in commands
    ]
    ready, stop = serve_samples(server_url, args.runs)
    rows += [
        row("loopwright serve: launch to /healthz", ready),
        row("loopwright serve: SIGTERM to exit", stop),
    ]
    cumulative, by_package = import_costs(args.runs)

    bytecode = (
        "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    )
    print(f"start-up, {args.runs} runs each (fresh processes; bytecode cache {bytecode})")
    print(f"  {'':<40} {'wall s':>6} {'':>6}   {'cpu s':>6}")
    print(f"  {'':<40} {'p50':>6} {'max':>6}   {'p50':>6}")
    print("\n".join(rows))
    print(f"\nimport app.main: the {args.top} largest cumulative import times (median)")
    print(_top(cumulative, args.top))
    print(f"\nimport app.main: the {args.top} costliest packages (their modules' own time, median)")
    print(_top(by_package, args.top))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each measurement")
    parser.add_argument("--top", type=int, default=15, help="import costs listed")
    main(parser.parse_args())
