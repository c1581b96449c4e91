"""ReflectV's releases are training data (MIRROR's reflective trajectories, seed 002): no
evaluation is reported on them, so there is no lmms-eval task; they export for training
(``sft/conversations.jsonl``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..harness import Harness


def harness(manifest: Mapping[str, Any]) -> Harness:
    return Harness(
        note=(
            "No lmms-eval task: a ReflectV release is training data (reflective multi-turn trajectories, MIRROR's "
            "ReflectV); the paper reports no evaluation on it. Its `sft/conversations.jsonl` loads in LLaMA-Factory."
        )
    )
