"""Shapes shared by every resource: field types, pages, problem documents, probes."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(max_length=20_000)]
Reason = Annotated[str, StringConstraints(max_length=2_000)]


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list; pass `next_cursor` as `cursor` for the next one (null: no more)."""

    items: list[T]
    next_cursor: str | None


class Problem(BaseModel):
    """An RFC 9457 problem document. `code` is stable; match on it, not on `title`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=["urn:loopwright:problem:not_found"])
    title: str
    status: int
    detail: str
    code: str = Field(examples=["not_found"])
    instance: str | None = None


class Health(BaseModel):
    status: str
