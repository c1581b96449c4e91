"""Model calls of DeflectionBench stages I and III against the naive count.

Naive: Algorithm 1 with no early elimination: every gating model on every sample (Stage I),
every gating model on every sample's gold set, then on every distractor of the samples that
passed the gold check (Stage III; the naive algorithm never checks distractors of samples
the gold check discarded). Goal: ratio <= 0.6.

Reads the calls table of a demo release (run `make demo` first, or pass a release path);
a request counts once whether it reached the model or, on a rerun, the response cache.

    python bench/stage_calls.py [RELEASE]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[1] / "releases_out" / "deflectionbench" / "1.0.0"


def main(release: Path) -> None:
    manifest = json.loads((release / "manifest.json").read_text())
    rows = manifest["statistics"]["calls"]
    made = naive = 0
    print(f"{'stage':<6} {'requests':>9} {'naive':>7} {'ratio':>6}")
    for row in rows:
        if row["step"] != "total":
            continue
        requests = row["calls"] + row["cache_hits"]
        made += requests
        naive += row["naive"]
        print(f"{row['stage']:<6} {requests:>9} {row['naive']:>7} {requests / max(row['naive'], 1):>6.2f}")
    print(f"{'I+III':<6} {made:>9} {naive:>7} {made / max(naive, 1):>6.2f}   (goal <= 0.60)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
