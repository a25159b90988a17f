"""What a dashboard page declares: its routes, and its link in the navigation bar.

A domain's `ui` module exposes `PAGE`; `app/dashboard/pages.py` lists every page, and the
bar is built from the links they declare, in their `order`."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter


@dataclass(frozen=True)
class NavItem:
    """A link in the bar. `key` is the `section` the page renders with: the bar marks its
    link as the current page."""

    key: str
    label: str
    href: str
    order: int  # left to right, ascending


@dataclass(frozen=True)
class Page:
    """A dashboard page (or a family of them under one prefix)."""

    router: APIRouter
    nav: NavItem | None = None  # None: reached from other pages, no link of its own


def navigation(pages: tuple[Page, ...]) -> tuple[NavItem, ...]:
    """The bar's links, in their order."""
    return tuple(sorted((p.nav for p in pages if p.nav is not None), key=lambda n: n.order))
