"""The backend interface: run a batch, report each result as soon as it is known."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from mmcurate.core.errors import MmcurateError
from mmcurate.models.requests import ChatRequest, ChatResponse

OnResult = Callable[[int, ChatResponse], None]  # (index in the batch, response)


class BackendError(MmcurateError):
    """A backend cannot be used at all (missing package, server that will not start)."""


class RequestError(ValueError):
    """One request cannot be sent (e.g. an image missing from the store); it fails alone."""


class Backend(ABC):
    # Backend details that change answers but are not in ModelSpec.identity()
    # (e.g. a script's content hash); they enter the response-cache key.
    identity: dict[str, Any] = {}

    @abstractmethod
    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        """Answer every request; call ``on_result`` once per request, as each finishes.

        Failures are results too (``ChatResponse.text is None`` with ``error``); ``run``
        raises only when the whole backend is unusable.
        """

    def close(self) -> None:  # noqa: B027  (not abstract: a backend that holds nothing needs no close)
        """Free what the backend holds (connections, server processes, GPU memory)."""
