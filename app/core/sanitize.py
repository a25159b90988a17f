"""Error text that may reach a model or a client: no file paths, no credentials in URLs,
no tracebacks, and bounded in length."""

from __future__ import annotations

import re

_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s:@]+(:[^/\s@]*)?@", re.I)
_PATH = re.compile(r"(?<![\w.:/])(/[\w.-]+){2,}/?")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):.*", re.S)


def sanitize(message: str, *, limit: int = 500) -> str:
    text = _TRACEBACK.sub("[traceback removed]", message)
    text = _CREDENTIALS.sub(lambda m: m.group("scheme") + "***@", text)
    text = _PATH.sub("[path]", text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
