"""One base error, so callers can catch everything mmcurate raises on purpose."""

from __future__ import annotations


class MmcurateError(ValueError):
    """A problem the user can fix; the CLI prints its message as one line."""


class SourceError(MmcurateError):
    """A source root (or a required file in it) is unusable."""


class ConfigError(MmcurateError):
    """A configuration file is missing or invalid."""


class ImageRejected(MmcurateError):
    """Image bytes that must not enter the store (corrupt, truncated, too large, unsafe path)."""
