"""Constrained field types shared by the API's shapes and the model configuration."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

# Surrounding whitespace is stripped; what is left must not be empty (the pattern: at least
# one character that is not whitespace, which says the same to JSON Schema). The strip
# takes U+0085 (NEL) as whitespace, which JSON Schema's `\s` does not: the pattern names it.
_NOT_BLANK = r"[^\s\x85]"
Name = Annotated[
    str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True, pattern=_NOT_BLANK)
]
# A sentence or a paragraph that must say something (an acceptance criterion).
Statement = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2_000, strip_whitespace=True, pattern=_NOT_BLANK),
]
Text = Annotated[str, StringConstraints(max_length=20_000)]
Reason = Annotated[str, StringConstraints(max_length=2_000)]
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]{1,64}$")]
