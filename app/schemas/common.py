"""Shapes shared by every resource: field types, pages, problem documents, probes."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

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
