"""What the SDK-backed providers share: an SDK client made from a key, made again from a
fresh key after a 401 (a rotated secret file), closed with the provider."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar


class _Closable(Protocol):
    async def close(self) -> None: ...


Client = TypeVar("Client", bound=_Closable)


class SdkClientOwner(ABC, Generic[Client]):
    """The SDK never retries (`max_retries=0` in `_new_client`): the caller's policy does."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        key_source: Callable[[], str] | None = None,
    ) -> None:
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._key_source = key_source
        self._client = self._new_client(api_key)

    @abstractmethod
    def _new_client(self, api_key: str) -> Client: ...

    async def refresh_credentials(self) -> None:
        """After a 401: read the key again from its source and start a new client, which
        also drops connections a reset left behind."""
        if self._key_source is None:
            return
        old, self._client = self._client, self._new_client(self._key_source())
        await old.close()

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def transport_cause(exc: Exception, sdk_error: type[Exception]) -> str:
    """The transport's own error, which the SDK's wrapper (`sdk_error`) hides behind a
    generic message."""
    cause = exc.__cause__ if isinstance(exc, sdk_error) and exc.__cause__ else exc
    return f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
