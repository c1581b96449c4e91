"""The dry run's config (configs/dryrun.yaml: two scripted models) pointed at this checkout's
scripts and the bundled fixtures, for the tests and the benches that curate it."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def dryrun_config(
    home: Path,
    fixtures: Path,
    *,
    releases: str = "releases",
    oracle_rule: str | None = None,
    sources: tuple[str, ...] | None = None,
    reader_script: Path | None = None,
    leakage_filter: str | None = None,
    workdir: str | None = None,
    releases_root: str | None = None,
) -> Path:
    """Writes ``home/dryrun-<releases>.yaml``: workdir ``home/work`` and releases root
    ``home/<releases>`` unless ``workdir`` / ``releases_root`` (paths or URLs) are given."""
    config = yaml.safe_load((REPO / "configs" / "dryrun.yaml").read_text())
    config["workdir"] = workdir or str(home / "work")
    config["releases_root"] = releases_root or str(home / releases)
    for model in config["models"].values():
        model["script"] = str(REPO / "configs" / model["script"])
    if reader_script is not None:
        config["models"]["vlm-reader"]["script"] = str(reader_script)
    bench = config["deflectionbench"]
    bench["sources"] = [s for s in bench["sources"] if sources is None or s["name"] in sources]
    for source in bench["sources"]:
        source["root"] = str(fixtures / Path(source["root"]).name)
    bench["retrieval"]["kb"] = str(fixtures / "kb" / "kb.jsonl")
    if oracle_rule is not None:
        bench["gating"]["oracle_rule"] = oracle_rule
    if leakage_filter is not None:
        bench["retrieval"]["leakage_filter"] = leakage_filter
    path = home / f"dryrun-{releases}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
