"""What identifies a release's content regardless of when, where and by which pyarrow it was
written: one hash per config over its rows (embedded images by the sha256 of their bytes,
rows sorted), and one hash over the ledger's verdict rows (sample, stage, check, model,
context, verdict; run ids and details left out).

``portable=True`` is the fingerprint a golden file pins across machines: BERTopic's topic rows
are counted but their labels left out, since a topic's words come from UMAP and HDBSCAN
numerics that differ with the installed numba, pynndescent and scikit-learn (the same seeded
run labels its clusters otherwise under other versions). Two runs on one machine compare
everything (the default)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

VERDICT = ("sample_id", "stage", "check", "model", "context_id", "verdict")


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"bytes", "path"}:  # an embedded image
            return {"image_sha256": hashlib.sha256(value["bytes"]).hexdigest() if value["bytes"] else None}
        return {k: _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode("utf-8")).hexdigest()


TOPICS = "topics"  # the ledger stage of BERTopic's topic rows


def content_fingerprint(release: Path, portable: bool = False) -> dict[str, Any]:
    manifest = json.loads((release / "manifest.json").read_text())
    configs = {}
    for config, shards in sorted(manifest["shards"].items()):
        rows = [row for rel in shards for row in pq.read_table(release / rel).to_pylist()]
        configs[config] = {
            "rows": len(rows),
            "sha256": _digest([json.dumps(_canonical(r), sort_keys=True) for r in rows]),
        }
    ledger = pq.read_table(release / "ledger.parquet", columns=list(VERDICT)).to_pylist()
    out: dict[str, Any] = {"configs": configs, "ledger_rows": len(ledger)}
    if portable:
        out["topic_rows"] = sum(r["stage"] == TOPICS for r in ledger)
        ledger = [r for r in ledger if r["stage"] != TOPICS]
    return {**out, "ledger_verdicts": _digest([json.dumps([r[k] for k in VERDICT]) for r in ledger])}
