"""README.md in the Hugging Face dataset-card format: YAML header, then explanation."""

from __future__ import annotations

from pathlib import Path

import yaml
from huggingface_hub import DatasetCardData
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted

from .changelog import card_section
from .kind import ReleaseKind

TEMPLATES = Path(__file__).parent / "templates"
# What each source's publishers state about the terms of their data, and where. An entry
# without a licence id is one whose terms mmcurate could not check from here: the card says
# so and points at the source's own page rather than guessing.
SOURCE_LICENSES: dict[str, dict[str, str | None]] = {
    "evqa": {
        "license": "cc-by-4.0",
        "where": "https://github.com/google-research/google-research/tree/master/encyclopedic_vqa",
        "note": "annotations; images come from iNaturalist 2021 and Google Landmarks v2 under their own terms",
    },
    "infoseek": {
        "license": None,
        "where": "https://github.com/open-vision-language/infoseek",
        "note": "images are the OVEN snapshot, whose Hugging Face page asks users to accept its conditions",
    },
    "webqa": {"license": None, "where": "https://github.com/WebQnA/WebQA", "note": "web images and snippets"},
    "mmdocrag": {"license": None, "where": "https://github.com/MMDocRAG/MMDocRAG", "note": "pages of public documents"},
    "mragbench": {"license": None, "where": "https://huggingface.co/datasets/uclanlp/MRAG-Bench", "note": ""},
    "viquae": {
        "license": None,
        "where": "https://github.com/PaulLerner/ViQuAE",
        "note": "images from Wikimedia Commons under their own licences",
    },
    "gqa": {
        "license": "cc-by-4.0",
        "where": "https://cs.stanford.edu/people/dorarad/gqa/about.html",
        "note": "questions; images from Visual Genome",
    },
    "textvqa": {
        "license": "cc-by-4.0",
        "where": "https://textvqa.org/dataset/",
        "note": "annotations; images from Open Images under their own licences",
    },
    "docvqa": {"license": None, "where": "https://rrc.cvc.uab.es/?ch=17", "note": "download after registration"},
    "chartqa": {"license": None, "where": "https://github.com/vis-nlp/ChartQA", "note": "charts from public websites"},
    "fire": {"license": None, "where": "https://huggingface.co/datasets/PengxiangLi/FIRE", "note": ""},
    "pope": {
        "license": "mit",
        "where": "https://github.com/RUCAIBox/POPE",
        "note": "the question files; images from COCO val2014, GQA or A-OKVQA under their own terms",
    },
    "pope_objects": {
        "license": None,
        "where": "",
        "note": "probes built from the object annotations given (COCO's annotations are CC BY 4.0, "
        "its images under Flickr terms)",
    },
    "reddit": {
        "license": None,
        "where": "https://www.redditinc.com/policies/user-agreement",
        "note": "posts and comments belong to their authors and are used under Reddit's User Agreement; "
        "no open licence covers them",
    },
}


def source_licenses(manifest: dict) -> list[dict]:
    """One row per source of the release: its stated licence (or none checked) and where."""
    sources = sorted((manifest.get("counts") or {}).get("per_source") or {})
    return [
        {"source": s, **SOURCE_LICENSES.get(s, {"license": None, "where": "", "note": "unknown source"})}
        for s in sources
    ]


def card_license(licenses: list[dict]) -> dict:
    """The header's licence fields: one id when every source states the same one, else ``other``."""
    ids = {row["license"] for row in licenses}
    if len(ids) == 1 and None not in ids:
        return {"license": ids.pop()}
    return {"license": "other", "license_name": "per-source terms", "license_link": "README.md#license"}


def built_with_scripted_models(manifest: dict) -> bool:
    return any(model.get("backend") == "scripted" for model in manifest.get("models") or [])


SCRIPTED_BANNER = (
    "> **Built with scripted models.** The models that curated this release answer from fixed rules\n"
    "> (a dry run of the pipeline), not from model weights: its samples show what the pipeline\n"
    "> does, not what any model knows."
)


def banners(manifest: dict) -> list[str]:
    """The warnings a reader must see first (the card's and the run's Prefect artifact): a
    release shaped by scripted models, or one whose failed model calls held samples out."""
    out = [SCRIPTED_BANNER] if built_with_scripted_models(manifest) else []
    incomplete = manifest.get("incomplete")
    if incomplete:
        failed = ", ".join(
            f"{model}: {n['failed']} of {n['calls']} calls" for model, n in incomplete.get("failed_calls", {}).items()
        )
        out.append(
            f"> **Incomplete release.** Model calls failed while it was curated\n> ({failed});\n"
            f"> {counted(incomplete.get('held_out', 0), 'sample')} held out by those errors, not curated away. "
            "Rerunning the\n> same configuration completes it."
        )
    return out


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
    )
    env.filters["counted"] = counted
    return env


def yaml_header(manifest: dict, features: dict, kind: ReleaseKind) -> str:
    """The card's metadata through ``huggingface_hub.DatasetCardData`` (the Hub's own schema):
    one ``configs`` entry per table, so the Hub's viewer and ``datasets.load_dataset(DIR, config)``
    find each; the first (one row per sample) is the default, so ``load_dataset(DIR)`` needs no
    name. A licence every source states is also the tables' ``DatasetInfo.license``. ``features`` maps config -> datasets.Features of its (image-embedded) table."""
    rows = manifest["counts"]["rows"]
    sizes = manifest["counts"].get("bytes") or {}
    split = kind.split
    licence = card_license(source_licenses(manifest))
    stated = {"license": licence["license"]} if licence["license"] != "other" else {}  # DatasetInfo.license
    card = DatasetCardData(
        pretty_name=f"{kind.pretty} {manifest['version']}",
        **licence,
        configs=[
            {
                "config_name": c,
                "data_files": [{"split": split, "path": f"data/{c}-*.parquet"}],
                **({"default": True} if i == 0 else {}),
            }
            for i, c in enumerate(features)
        ],
        dataset_info=[
            {
                "config_name": c,
                "features": f._to_yaml_list(),
                "splits": [{"name": split, "num_bytes": int(sizes.get(c, 0)), "num_examples": int(rows[c])}],
                **stated,
            }
            for c, f in features.items()
        ],
    )
    return card.to_yaml() + "\n"


def config_highlights(manifest: dict) -> dict:
    """The few settings a reader of the card needs; the full config is in manifest.json."""
    config = manifest.get("config") or {}
    bench = config.get(manifest["benchmark"]) or {}
    return {k: v for k, v in bench.items() if not isinstance(v, (dict, list)) or k in ("gating", "source_mix")}


def render_card(
    manifest: dict, features: dict, plots: dict[str, str], kind: ReleaseKind, changelog: str | None = None
) -> str:
    """The card; a re-curation's ``changelog`` (CHANGELOG.md) becomes its "Changes" section."""
    template = environment().get_template("card.md.j2")
    return template.render(
        changes=card_section(changelog) if changelog else None,
        m=manifest,
        pretty=kind.pretty,
        description=kind.description,
        banners=banners(manifest),
        licenses=source_licenses(manifest),
        header=yaml_header(manifest, features, kind),
        configs=list(features),
        split=kind.split,
        tables={name: markdown_table(rows) for name, rows in manifest["statistics"].items() if rows},
        plots=plots,
        highlights=yaml.safe_dump(config_highlights(manifest), sort_keys=True).strip(),
    )
