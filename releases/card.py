"""README.md in the Hugging Face dataset-card format: YAML header, then explanation."""
from __future__ import annotations

from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from mmcurate.core.markdown import markdown_table

TEMPLATES = Path(__file__).parent / "templates"
SPLIT = "test"  # every config is an evaluation set, except in a training set's release
SPLITS = {"reflectv": "train"}
PRETTY = {"deflectionbench": "VLM-DeflectionBench", "reflvqa": "RefLVQA", "reflectv": "ReflectV"}
ABOUT = {  # what the card's first paragraph says, when not the retrieval-benchmark text
    "reflectv": "ReflectV is a training set of reflective, visually grounded trajectories curated by "
                "mmcurate as MIRROR describes: a student model answers, a teacher scores and corrects, "
                "only dialogues that improve steadily to a right answer are kept, the teacher's feedback "
                "becomes a first-person reflection that points at marks drawn on the image, and a "
                "verifier checks the marks.",
}


def environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )


def yaml_header(manifest: dict, features: dict) -> str:
    """``features`` maps config -> datasets.Features of its (image-embedded) table."""
    rows = manifest["counts"]["rows"]
    split = SPLITS.get(manifest["benchmark"], SPLIT)
    header = {
        "pretty_name": f"{PRETTY.get(manifest['benchmark'], manifest['benchmark'])} {manifest['version']}",
        "license": "other",  # placeholder: the sources' licenses decide; see the card body
        "configs": [
            {"config_name": c, "data_files": [{"split": split, "path": f"data/{c}-*.parquet"}]} for c in features
        ],
        "dataset_info": [
            {
                "config_name": c,
                "features": f._to_yaml_list(),
                "splits": [{"name": split, "num_examples": int(rows[c])}],
            }
            for c, f in features.items()
        ],
    }
    return yaml.safe_dump(header, sort_keys=False, allow_unicode=True)


def config_highlights(manifest: dict) -> dict:
    """The few settings a reader of the card needs; the full config is in manifest.json."""
    config = manifest.get("config") or {}
    bench = config.get(manifest["benchmark"]) or {}
    return {k: v for k, v in bench.items() if not isinstance(v, (dict, list)) or k in ("gating", "source_mix")}


def render_card(manifest: dict, features: dict, plots: dict[str, str]) -> str:
    template = environment().get_template("card.md.j2")
    return template.render(
        m=manifest,
        pretty=PRETTY.get(manifest["benchmark"], manifest["benchmark"]),
        header=yaml_header(manifest, features),
        configs=list(features),
        split=SPLITS.get(manifest["benchmark"], SPLIT),
        about=ABOUT.get(manifest["benchmark"]),
        tables={name: markdown_table(rows) for name, rows in manifest["statistics"].items() if rows},
        plots=plots,
        highlights=yaml.safe_dump(config_highlights(manifest), sort_keys=True).strip(),
    )
