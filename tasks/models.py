"""Secrets for the model layer, from Prefect Secret blocks (the only place they are read)."""

from __future__ import annotations

from prefect.blocks.system import Secret


def prefect_secret(name: str) -> str:
    """The value of the Prefect Secret block ``name``; KeyError when there is none."""
    try:
        return Secret.load(name).get()  # type: ignore[union-attr]  # sync_compatible: a value outside an event loop
    except ValueError:
        raise KeyError(name) from None
