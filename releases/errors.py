"""Errors the release commands raise on purpose (all print as one line in the CLI)."""

from __future__ import annotations

from mmcurate.core.errors import MmcurateError


class ReleaseError(MmcurateError):
    """A release cannot be written, read or published as asked."""


class ReleaseExists(ReleaseError):
    """Releases are immutable: a version is written once."""


class ReleaseIncomplete(ReleaseError):
    """A run's failures held samples out (or nothing remains): not publishable as complete."""


class ReleaseInvalid(ReleaseError):
    """The data-quality suite failed; ``failures`` lists the failing expectations."""

    def __init__(self, message: str, failures: list[str]) -> None:
        super().__init__(message)
        self.failures = failures
