"""What a model provider's package gives the registry: its name (an agent's
`model.provider`), its settings group, its pool, what a call lacks in its settings, its
shipped prices and tiers, and how its SDK loads. One object per package, `PROVIDER` in
its `__init__`, listed once in `registry.SHIPPED`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from pydantic import BaseModel

from app.core.model_config import ModelConfig
from app.core.vocabulary import ModelTier
from app.llm.model_price import ModelPrice
from app.llm.provider import ProviderPool

S = TypeVar("S", bound=BaseModel)


class ProviderKind(Protocol[S]):
    """A model provider. Its package's `__init__` must stay cheap to import: every process
    imports the registry, so the SDK loads only in `pool` (or with `sdk_module` on a
    thread at start-up, in a process that can use it)."""

    @property
    def name(self) -> str:
        """An agent's `model.provider`, and its settings group's name
        (`LOOPWRIGHT_LLM__<NAME>__…`)."""

    @property
    def settings(self) -> type[S]:
        """Its settings group's shape; every field has a default (a provider may need
        none: an empty model)."""

    @property
    def sdk_module(self) -> str | None:
        """The module whose import is slow enough to load in the background; None: none."""

    @property
    def own_models_only(self) -> bool:
        """Its servers know only their own models (a local server serves what it loaded):
        a call that would name a model of its own accord, as the compaction summary's does
        (`LOOPWRIGHT_COMPACTION__SUMMARY_MODEL`), names the agent's instead."""

    @property
    def prices(self) -> Mapping[str, ModelPrice]:
        """Its models' list prices (and tiers), by model name."""

    @property
    def tier_models(self) -> Mapping[ModelTier, str]:
        """The model of each tier a downgraded run moves to; empty: none."""

    def pool(self, settings: S) -> ProviderPool:
        """The pool that hands out its providers, made on first use, from its group."""

    def missing_credentials(self, settings: S, model: ModelConfig | None) -> str | None:
        """What a call to this model (None: an agent with nothing of its own) lacks, as the
        fix to make; None when nothing is."""
