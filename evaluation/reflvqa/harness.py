"""RefLVQA has no lmms-eval task: every cell of its grid (seed 004, section 4) has the model
write search queries first, retrieves from the release's knowledge base with them, then asks
for an answer citing the documents found, graded per sentence by evaluator models. An
lmms-eval task makes one generation per document, so the protocol cannot be expressed
there without changing it; ``mmcurate evaluate`` runs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..harness import Harness


def harness(manifest: Mapping[str, Any]) -> Harness:
    return Harness(
        note=(
            "No lmms-eval task: RefLVQA's TextRAG cell asks the model for search queries, retrieves from the "
            "release's knowledge base (the `knowledge_base` config, embedded with the release's text encoder), then "
            "asks for an answer citing the retrieved documents, graded per sentence by evaluator models: several "
            "dependent calls per question, which one lmms-eval generation per document cannot express. Run "
            "`mmcurate evaluate RELEASE --model SPEC --setting text`."
        )
    )
