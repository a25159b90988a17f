"""Publishing a shape with a rule between its fields as a union of the shapes it allows.

Some request shapes have a rule that ties fields together: a scripted model needs a script
and any other model has none; a turn has text or tool calls; an answer needs its text.
The server keeps one flat model for each (the code reads `model.script` whatever the
provider) and checks the rule in a validator, which JSON Schema cannot see. So the flat
model publishes, in its place, the union of the variants the rule allows: each a model
with exactly its fields (`additionalProperties: false`), the tag a `const`. The document
then says what the server accepts, and clients and fuzzers generate only that.

The variants must accept exactly what the flat model accepts; tests/events/test_published.py
holds each pair to it.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler, TypeAdapter
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs

JsonSchemaHook = Callable[[CoreSchema, GetJsonSchemaHandler], JsonSchemaValue]


def published_as(*variants: type[BaseModel], tag: str | None = None) -> Any:
    """A `__get_pydantic_json_schema__` for the model that holds it: its schema is
    `oneOf` the `variants` (which exclude one another), with the model's title and
    docstring. `tag`: a field each variant fixes to one value (a `Literal`), published as
    the OpenAPI `discriminator` with its mapping."""

    def schema(
        cls: type[BaseModel], core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        union = cs.union_schema([variant.__pydantic_core_schema__ for variant in variants])
        refs = handler(union)["anyOf"]
        published: dict[str, Any] = {"oneOf": refs, "title": cls.__name__}
        if cls.__doc__:
            published["description"] = inspect.cleandoc(cls.__doc__)
        if tag is not None:
            mapping = {}
            for variant, ref in zip(variants, refs, strict=True):
                for value in typing.get_args(variant.model_fields[tag].annotation):
                    mapping[str(getattr(value, "value", value))] = ref["$ref"]
            published["discriminator"] = {"propertyName": tag, "mapping": mapping}
        return published

    return classmethod(schema)


class PublishedAs:
    """`Annotated[T, PublishedAs(U)]`: a field validated as `T` and published as `U`, where
    `U` states a shape the code keeps loose (`dict[str, Any]`) with named, recursive types.
    `U` must accept what the code stores there; a test holds each use to it."""

    def __init__(self, published: Any) -> None:
        self.adapter: TypeAdapter[Any] = TypeAdapter(published)

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self.adapter.core_schema)
