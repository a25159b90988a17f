"""The sprints' charts laid out for drawing as inline SVG (the templates in `_charts.html`
draw them; colours come from classes, the pages' policy allows no inline styles):

- velocity: a pair of bars per completed sprint, oldest on the left (points committed,
  points completed) and the line of the rolling average of the completed points;
- burn-up: a sprint's scope and its completed points a day, over the whole of its dates
  (the days still to come stay empty).

Coordinates are in the SVG's own units (its `viewBox`), rounded to a tenth."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from app.sprints.schemas.burn_up import SprintBurnUp
from app.sprints.schemas.sprints import VelocityRecord

WIDTH = 720
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 44, 16, 14, 44  # margins: room for the axes' labels
MAX_TICKS = 5  # on the points axis, zero included
BAR_MAX_W = 34
X_LABELS = 8  # at most, on the days axis


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class Frame:
    """The plot's box within the SVG and its points axis (zero to `top`, a tick every
    `step`): `y(points)`."""

    top: int
    step: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    floor: int = HEIGHT - BOTTOM  # the y of zero points

    @classmethod
    def over(cls, largest: float) -> Frame:
        return cls(*_axis(largest))

    @property
    def plot_width(self) -> int:
        return self.right - self.left

    @property
    def ticks(self) -> list[Tick]:
        return [Tick(v, self.y(v)) for v in range(0, self.top + 1, self.step)]

    def y(self, value: float) -> float:
        return round(self.floor - (self.floor - TOP) * value / self.top, 1)


def _axis(largest: float) -> tuple[int, int]:
    """The axis's top and its step: a 1, 2 or 5 times a power of ten, such that at most
    `MAX_TICKS` ticks reach past `largest` (an empty chart gets 0 to 5)."""
    if largest <= 0:
        return 5, 1
    for power in range(0, 12):
        for unit in (1, 2, 5):
            step = unit * 10**power
            top = step * math.ceil(largest / step)
            if top // step < MAX_TICKS:
                return top, step
    raise ValueError(f"{largest} points are past any axis")


@dataclass(frozen=True)
class SprintBars:
    """One completed sprint: its two bars (x, y of the top, height), and its place on the
    line of the rolling average."""

    record: VelocityRecord
    label_x: float
    committed: tuple[float, float, float]
    completed: tuple[float, float, float]
    average: float
    average_y: float
    bar_width: float


@dataclass(frozen=True)
class VelocityChart:
    frame: Frame
    sprints: list[SprintBars]
    window: int
    average_line: str  # SVG polyline points

    @property
    def empty(self) -> bool:
        return not self.sprints


def velocity_chart(records: Sequence[VelocityRecord], window: int, shown: int) -> VelocityChart:
    """`records` newest first (as the velocity is read), the `window - 1` before the shown
    ones included so that the first shown gets its full average; the newest `shown` are
    drawn."""
    oldest_first = list(reversed(records))
    averages = []
    for i in range(len(oldest_first)):
        spanned = oldest_first[max(0, i - window + 1) : i + 1]
        averages.append(sum(r.completed_points for r in spanned) / len(spanned))
    drawn = list(zip(oldest_first, averages, strict=True))[-shown:] if shown else []
    largest = max((max(r.committed_points, r.completed_points) for r, _ in drawn), default=0)
    frame = Frame.over(largest)
    slot = frame.plot_width / max(len(drawn), 1)
    bar = round(min(BAR_MAX_W, slot * 0.36), 1)
    bars = []
    for i, (record, average) in enumerate(drawn):
        middle = frame.left + slot * (i + 0.5)
        bars.append(
            SprintBars(
                record=record,
                label_x=round(middle, 1),
                committed=_bar(frame, middle - bar - 1, record.committed_points),
                completed=_bar(frame, middle + 1, record.completed_points),
                average=round(average, 1),
                average_y=frame.y(average),
                bar_width=bar,
            )
        )
    line = " ".join(f"{b.label_x},{b.average_y}" for b in bars)
    return VelocityChart(frame, bars, window, line)


def _bar(frame: Frame, x: float, value: int) -> tuple[float, float, float]:
    top = frame.y(value)
    return round(x, 1), top, round(frame.floor - top, 1)


@dataclass(frozen=True)
class DayMark:
    """A day drawn: where, and its points."""

    date: date
    x: float
    scope: int
    completed: int
    scope_y: float
    completed_y: float


@dataclass(frozen=True)
class BurnUpChart:
    frame: Frame
    days: list[DayMark]
    axis_labels: list[tuple[date, float]]  # the dates written under the axis
    scope_line: str
    completed_line: str

    @property
    def empty(self) -> bool:
        return not self.days


def burn_up_chart(burn_up: SprintBurnUp) -> BurnUpChart:
    """The sprint's days across the width, from `start_date` to `end_date`: the points
    reach as far as the burn-up does (today, or the sprint's end)."""
    span = (burn_up.end_date - burn_up.start_date).days
    largest = max([p.scope_points for p in burn_up.points] + [burn_up.committed_points])
    frame = Frame.over(largest)
    every = max(1, math.ceil((span + 1) / X_LABELS))

    def x(day: date) -> float:
        offset = (day - burn_up.start_date).days
        if span == 0:
            return frame.left + frame.plot_width / 2
        return round(frame.left + frame.plot_width * offset / span, 1)

    days = [
        DayMark(
            date=p.date,
            x=x(p.date),
            scope=p.scope_points,
            completed=p.completed_points,
            scope_y=frame.y(p.scope_points),
            completed_y=frame.y(p.completed_points),
        )
        for p in burn_up.points
    ]
    labels = [
        (day, x(day))
        for offset in range(span + 1)
        if offset % every == 0 or offset == span
        for day in [date.fromordinal(burn_up.start_date.toordinal() + offset)]
    ]
    if len(labels) > 1 and (labels[-1][0] - labels[-2][0]).days < every:
        del labels[-2]  # the end date is always written; its neighbour gives way
    return BurnUpChart(
        frame,
        days,
        labels,
        " ".join(f"{d.x},{d.scope_y}" for d in days),
        " ".join(f"{d.x},{d.completed_y}" for d in days),
    )
