"""Flow tests import their shared helpers (flowkit, release_fingerprint) from this folder;
``asked`` counts the requests each model is sent."""

from __future__ import annotations

from collections import Counter

import pytest


@pytest.fixture
def asked(monkeypatch) -> Counter[str]:
    """Requests sent to each model (by name) from the moment the test asks for this fixture."""
    from mmcurate.models.client import ModelClient

    asked: Counter[str] = Counter()
    real = ModelClient.chat

    def spy(self, requests, stage):
        asked[self.spec.name] += len(requests)
        return real(self, requests, stage)

    monkeypatch.setattr(ModelClient, "chat", spy)
    return asked
