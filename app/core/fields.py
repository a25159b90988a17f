"""Constrained field types shared by the API's shapes and the model configuration."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(max_length=20_000)]
Reason = Annotated[str, StringConstraints(max_length=2_000)]
ToolName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_]{1,64}$")]
