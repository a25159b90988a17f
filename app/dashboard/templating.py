"""Rendering the dashboard: the Jinja2 environment (autoescaped), its filters, the static
files' URLs (with a hash of their content, so a new version is never read from a stale
cache), the pages' navigation and their security headers."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from functools import cache
from importlib.resources import files
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from markupsafe import Markup

from app.dashboard.deps import Viewer

STATIC_URL = "/ui/static"


# Everything a page loads comes from the service itself; scripts only from files.
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


@cache
def static_url(name: str) -> str:
    content = (files("app.dashboard") / "static" / name).read_bytes()
    return f"{STATIC_URL}/{name}?v={hashlib.sha256(content).hexdigest()[:12]}"


def _when(value: datetime | None) -> Markup:
    """A time as `<time>`: ISO 8601 for machines and the browser's script, which shows it
    in the reader's zone; UTC until then."""
    if value is None:
        return Markup("—")
    shown = value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}">{}</time>').format(value.isoformat(), shown)


def _usd(cost: float | None) -> str:
    """Dollars to the cent, to four places under a cent; `—` when not known (a model
    without a price)."""
    if cost is None:
        return "—"
    return f"${cost:,.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _compact(value: Any) -> str:
    """JSON on one line, as text (autoescaped where it is put, unlike `tojson`'s escapes)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("app.dashboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["pretty"] = _pretty
    env.filters["compact"] = _compact
    env.filters["usd"] = _usd
    env.globals["static"] = static_url
    return env


TEMPLATES = Jinja2Templates(env=_environment())


def render(
    request: Request,
    template: str | Template,
    viewer: Viewer,
    context: dict[str, Any] | None = None,
    *,
    status_code: int = 200,
) -> HTMLResponse:
    """A page or a fragment of one, with the dashboard's security headers and its
    navigation bar's links. `template`: a name in the dashboard's templates, or one a page
    compiled itself (`TEMPLATES.env.from_string`: a page whose files live elsewhere)."""
    page = TEMPLATES.env.get_template(template)  # a compiled one is returned as it is
    values = {
        "request": request,
        "viewer": viewer,
        "section": "",
        "nav": request.app.state.dashboard_nav,
        **(context or {}),
    }
    return HTMLResponse(page.render(values), status_code=status_code, headers=_HEADERS)
