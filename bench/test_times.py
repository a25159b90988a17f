"""`make test-times`: where the suite's time goes, read from a JUnit report of a run
(`pytest --junitxml=…`; `make test-times` makes one, in parallel as `make test` runs).

Prints, per tier (`tests/<tier>`), the tests, the time summed over them (setup, call and
teardown: what a worker spent on them) and the slowest test; then the slowest files and
the slowest tests. Summed time is not wall time when the suite runs on several workers:
the wall time is the run's own, printed by pytest and by `make test-times`."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    file: str  # tests/runs/test_runs_api.py
    name: str
    seconds: float

    @property
    def tier(self) -> str:
        return self.file.split("/")[1]


def cases(report: str) -> list[Case]:
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        # `classname` is the dotted module (and class, for tests in one): tests.api.test_x
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        file = "/".join(parts) + ".py"
        found.append(Case(file, case.get("name", ""), float(case.get("time", 0))))
    return found


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report(all_cases: list[Case], top: int) -> str:
    tiers: dict[str, list[Case]] = defaultdict(list)
    files: dict[str, list[Case]] = defaultdict(list)
    for case in all_cases:
        tiers[case.tier].append(case)
        files[case.file].append(case)
    total = sum(c.seconds for c in all_cases)
    by_tier = sorted(tiers.items(), key=lambda kv: -sum(c.seconds for c in kv[1]))
    tier_rows = [
        (
            tier,
            str(len(group)),
            f"{sum(c.seconds for c in group):.0f}",
            f"{100 * sum(c.seconds for c in group) / total:.0f} %",
            f"{max(c.seconds for c in group):.1f}",
        )
        for tier, group in by_tier
    ]
    tier_rows.append(("all", str(len(all_cases)), f"{total:.0f}", "100 %", ""))
    slow_files = sorted(files.items(), key=lambda kv: -sum(c.seconds for c in kv[1]))[:top]
    file_rows = [
        (name, str(len(group)), f"{sum(c.seconds for c in group):.1f}")
        for name, group in slow_files
    ]
    slow_cases = sorted(all_cases, key=lambda c: -c.seconds)[:top]
    case_rows = [(f"{c.file}::{c.name}", f"{c.seconds:.1f}") for c in slow_cases]
    return "\n\n".join(
        [
            table(tier_rows, ("tier", "tests", "summed s", "share", "slowest s")),
            f"The {top} slowest files:\n\n" + table(file_rows, ("file", "tests", "summed s")),
            f"The {top} slowest tests:\n\n" + table(case_rows, ("test", "s")),
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="JUnit XML reports of pytest runs")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    found = [case for report in args.reports for case in cases(report)]
    if not found:
        print("no test cases in the reports", file=sys.stderr)
        return 1
    print(report(found, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
