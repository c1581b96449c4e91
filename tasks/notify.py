"""Telling people what an unattended run did: a Prefect markdown artifact, and a message
through a Prefect notification block (Slack, e-mail, Apprise, ... configured in Prefect)
when one is named, e.g. ``slack-webhook/curation`` (block type slug / block name)."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.blocks.core import Block
from prefect.cache_policies import NO_CACHE

from mmcurate.core.errors import ConfigError


@task(name="report-outcome", cache_policy=NO_CACHE)
def report_outcome(key: str, subject: str, markdown: str, block: str | None = None) -> None:
    """Record ``markdown`` as the artifact ``key`` and send it through notification ``block``."""
    create_markdown_artifact(key=key, markdown=markdown, description=subject)
    if not block:
        return
    try:
        notifier = Block.load(block)
    except ValueError:
        raise ConfigError(
            f"notification block {block!r} not found (give its type slug and name, e.g. slack-webhook/curation)"
        ) from None
    if not callable(getattr(notifier, "notify", None)):
        raise ConfigError(f"block {block!r} is not a notification block")
    notifier.notify(body=markdown, subject=subject)  # type: ignore[union-attr]  # sync_compatible, as Block.load
