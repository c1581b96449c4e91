"""The dry-run release of DeflectionBench (configs/dryrun.yaml: two scripted models, the
bundled fixtures) has exactly the content recorded before the package layout changed
(golden/dryrun-1.0.0.json, written by the code of commit 5cf30db): the same rows in the data
shards and the same ledger verdicts. A change that alters curation must update the golden
file on purpose and say why."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from release_fingerprint import content_fingerprint

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden" / "dryrun-1.0.0.json"


def test_dryrun_release_content_is_unchanged(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench import deflectionbench

    config = yaml.safe_load((REPO / "configs" / "dryrun.yaml").read_text())
    config["workdir"] = str(tmp_path / "work")
    config["releases_root"] = str(tmp_path / "releases")
    for model in config["models"].values():
        model["script"] = str(REPO / "configs" / model["script"])
    for source in config["deflectionbench"]["sources"]:
        source["root"] = str(fixtures_root / Path(source["root"]).name)
    config["deflectionbench"]["retrieval"]["kb"] = str(fixtures_root / "kb" / "kb.jsonl")
    path = tmp_path / "dryrun.yaml"
    path.write_text(yaml.safe_dump(config))

    release = Path(deflectionbench(config=str(path)))
    assert content_fingerprint(release) == json.loads(GOLDEN.read_text())
