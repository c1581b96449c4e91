"""POPE's splits balanced: the surplus of the larger label goes, seeded, with its reason."""

from __future__ import annotations

import pyarrow as pa

from mmcurate.annotation.pope.balance import SURPLUS, BalanceProbes
from mmcurate.core.records import Sample
from mmcurate.core.schema import SAMPLE
from mmcurate.core.stages import StageContext


def probes(labels: dict[str, list[str]], dataset: str = "d") -> pa.Table:
    rows = [
        Sample(
            "pope",
            f"{dataset}/{split}/{n}",
            "Is there a cat in the image?",
            [label],
            ["ab" * 32],
            meta={"split": split, "dataset": dataset},
        ).to_row()
        for split, split_labels in labels.items()
        for n, label in enumerate(split_labels, 1)
    ]
    return pa.Table.from_pylist(rows, schema=SAMPLE)


def test_only_the_surplus_goes(tmp_path) -> None:
    table = probes({"random": ["yes", "no", "yes", "no"], "popular": ["yes", "no", "no", "no", "yes", "no"]})
    ctx = StageContext(None, "r", None)  # type: ignore[arg-type]
    result = BalanceProbes(seed=1).run(table, ctx)
    kept = [(r["source_id"].split("/")[1], r["answers"][0]) for r in result.kept.to_pylist()]
    assert sorted(kept) == sorted(
        [("random", "yes"), ("random", "no")] * 2 + [("popular", "yes"), ("popular", "no")] * 2
    )
    dropped = [d for d in result.decisions if d.verdict == "drop"]
    assert len(dropped) == 2 and all(d.detail == {"reason": SURPLUS} for d in dropped)
    assert result.counts == {"input": 10, "kept": 8, "dropped": 2}
    again = BalanceProbes(seed=1).run(table.take([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]), ctx)
    assert {d.sample_id for d in again.decisions if d.verdict == "drop"} == {d.sample_id for d in dropped}  # seeded


def test_each_dataset_is_balanced_apart() -> None:
    # pooled, random is 2 yes / 2 no; per dataset, COCO's has a "yes" too many and GQA's a "no"
    table = pa.concat_tables(
        [probes({"random": ["yes", "yes", "no"]}, "coco"), probes({"random": ["yes", "no", "no"]}, "gqa")]
    )
    result = BalanceProbes(seed=1).run(table, StageContext(None, "r", None))  # type: ignore[arg-type]
    kept = sorted((r["source_id"].split("/")[0], r["answers"][0]) for r in result.kept.to_pylist())
    assert kept == [("coco", "no"), ("coco", "yes"), ("gqa", "no"), ("gqa", "yes")]
