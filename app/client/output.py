"""What the verbs print: tables of aligned columns, text cut to one line, dollars."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def one_line(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def usd(cost: float | None) -> str:
    """Dollars to the cent, or to four places under a cent; `?` when not known."""
    if cost is None:
        return "?"
    return f"${cost:,.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"
