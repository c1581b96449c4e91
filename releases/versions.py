"""Semantic versions of releases (``MAJOR.MINOR.PATCH``, nothing else), ordered as
``packaging.version.Version`` orders them."""

from __future__ import annotations

import re

from packaging.version import Version

from .errors import ReleaseError

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")  # what a release may be called


def parse_version(text: str) -> Version:
    if SEMVER.match(text or "") is None:
        raise ReleaseError(f"release version {text!r} is not a semantic version like 1.0.0")
    return Version(text)


def check_successor(version: str, parent: str | None) -> None:
    """A release must be newer than the release it was derived from."""
    new = parse_version(version)
    if parent is not None and parse_version(parent) >= new:
        raise ReleaseError(f"release version {version} must be greater than its parent {parent}")


def next_minor(version: str) -> str:
    """The version a re-curation publishes: ``1.2.3`` -> ``1.3.0``."""
    parsed = parse_version(version)
    return f"{parsed.major}.{parsed.minor + 1}.0"
