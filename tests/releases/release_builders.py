"""Small hand-made releases: Arrow tables over an ImageStore holding a few real images."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image

from mmcurate.core.ids import sample_id as make_id
from mmcurate.core.images import ImageStore
from mmcurate.core.ledger import Decision, ledger_table
from mmcurate.core.schema import QUARANTINE, SAMPLE
from mmcurate.releases.deflectionbench.draft import KIND as DEFLECTION
from mmcurate.releases.draft import ReleaseDraft
from mmcurate.releases.manifest import MANIFEST, body_digests, file_entry, sealed_digest
from mmcurate.releases.reflvqa.draft import KIND as REFLVQA

SEED = 7
K_MIN = 3
TEST_SCHEMA = SAMPLE.append(pa.field("shuffle_seed", pa.int64(), nullable=False))
SENTENCE = pa.struct(
    [
        pa.field("index", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("fact_checkable", pa.bool_()),
        pa.field("text_citations", pa.list_(pa.string())),
        pa.field("image_citations", pa.list_(pa.string())),
        pa.field("flagged", pa.bool_()),
    ]
)
QA_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("source_id", pa.string()),
        ("question", pa.string()),
        ("images", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("sentences", pa.list_(SENTENCE)),
        ("meta", pa.string()),
    ]
)
KB_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("modality", pa.string()),
        ("text", pa.string()),
        ("image", pa.string()),
        ("title", pa.string()),
    ]
)
DOCUMENTS_SCHEMA = KB_SCHEMA.append(pa.field("provenance", pa.string()))


def image_bytes(index: int, fmt: str = "PNG") -> bytes:
    """A distinct real image: a colour gradient with a per-index pattern."""
    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([(x * 4 + index * 40) % 256, (y * 5) % 256, ((x + y) * 3 * (index + 1)) % 256], axis=-1)
    buf = io.BytesIO()
    Image.fromarray(rgb.astype(np.uint8)).save(buf, format=fmt)
    return buf.getvalue()


def make_store(root: Path, n: int = 6) -> tuple[ImageStore, list[str]]:
    store = ImageStore(root)
    return store, [store.put(image_bytes(i, "PNG" if i % 2 else "JPEG")) for i in range(n)]


def put_corrupt_image(store: ImageStore) -> str:
    """Bytes that are not an image, stored under their hash (as a broken disk would leave them)."""
    data = b"\x89PNG\r\n\x1a\n" + b"truncated"
    from mmcurate.core.ids import sha256_bytes

    sha = sha256_bytes(data)
    path = store.root / sha[:2] / f"{sha}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return sha


def ctx(cid: str, text: str | None = None, image: str | None = None) -> dict:
    return {
        "context_id": cid,
        "modality": "image" if image else "text",
        "text": text,
        "image": image,
        "title": f"T {cid}",
    }


def deflection_rows(shas: list[str], n: int = 6, sources: tuple[str, ...] = ("infoseek", "webqa")) -> list[dict]:
    rows = []
    for i in range(n):
        source = sources[i % len(sources)]
        negatives = [ctx(f"neg-{i}-{j}", text=f"distractor passage {j} about topic {i}") for j in range(K_MIN)]
        negatives.append(ctx(f"negimg-{i}", image=shas[(i + 1) % len(shas)]))
        rows.append(
            {
                "sample_id": make_id(source, str(i)),
                "source": source,
                "source_id": str(i),
                "question": f"What is shown in picture {i}?",
                "answers": [f"answer {i}", f"alias {i}"],
                "images": [shas[i % len(shas)]],
                "gold_contexts": [ctx(f"gold-{i}", text=f"the gold passage for question {i}")],
                "negative_contexts": negatives,
                "meta": json.dumps({"row": i}),
                "shuffle_seed": SEED,
            }
        )
    return rows


def decisions_for(rows: list[dict], dropped: dict[str, str] | None = None) -> list[Decision]:
    out = []
    for r in rows:
        out.append(Decision(r["sample_id"], "ingest", "schema_v1", "keep"))
        out.append(
            Decision(r["sample_id"], "gating", "parametric_v1", "keep", model="smollm2", detail={"grade": "INCORRECT"})
        )
    for sid, model in (dropped or {}).items():
        out.append(
            Decision(sid, "gating", "parametric_v1", "drop", model=model, detail={"reason": "answered correctly"})
        )
    return out


STATISTICS = {
    "per_source": [
        {"source": "infoseek", "ingested": 10, "retained": 3},
        {"source": "webqa", "ingested": 8, "retained": 3},
    ],
    "global": [{"samples": 6, "avg_negatives": 4.0}],
    "funnel": [
        {"stage": "ingest", "remaining": 18},
        {"stage": "gating", "remaining": 8},
        {"stage": "mining", "remaining": 6},
    ],
    "calls": [{"stage": "gating", "model": "smollm2", "calls": 18, "cache_hits": 2, "failures": 0, "naive": 36}],
    "convergence": [
        {"n_models": 1, "model": "smollm2", "retained": 10},
        {"n_models": 2, "model": "gemma", "retained": 6},
    ],
    "judge_errors": [{"model": "lexical", "count": 1}],
}


def deflection_draft(
    rows: list[dict],
    version: str = "1.0.0",
    parent: str | None = None,
    decisions: list[Decision] | None = None,
    source_mix: dict | None = None,
) -> ReleaseDraft:
    quarantine = pa.Table.from_pylist(
        [
            {"source": "webqa", "locator": "data.json:3", "reason": "missing answer", "raw": "{}"},
            {"source": "webqa", "locator": "data.json:9", "reason": "missing answer", "raw": None},
        ],
        schema=QUARANTINE,
    )
    config = {"deflectionbench": {"k_min": K_MIN, "seed": SEED, "version": version, "source_mix": source_mix or {}}}
    return ReleaseDraft(
        kind=DEFLECTION,
        version=version,
        parent=parent,
        tables={"test": pa.Table.from_pylist(rows, schema=TEST_SCHEMA)},
        ledger=ledger_table(decisions if decisions is not None else decisions_for(rows), run_id=f"run-{version}"),
        quarantine=quarantine,
        config=config,
        models=[
            {
                "role": "gating",
                "name": "smollm2",
                "backend": "embedded",
                "model": "smollm2",
                "revision": "q8",
                "vision": False,
            }
        ],
        judge={"name": "lexical"},
        components={
            "text_encoder": "minilm-l6-v2",
            "image_encoder": "descriptor-hsv-hog-v1",
            "entailment": "lexical-overlap-v1",
        },
        source_files=[],
        counts={"per_stage": {"ingest": 18, "gating": 8}, "per_source": {"infoseek": 3, "webqa": 3}},
        statistics=STATISTICS,
        seed=SEED,
        k_min=K_MIN,
        notes=["image encoder is a descriptor stand-in for CLIP"],
    )


def with_rows(draft: ReleaseDraft, rows: list[dict]) -> ReleaseDraft:
    return replace(draft, tables={"test": pa.Table.from_pylist(rows, schema=TEST_SCHEMA)})


def reflvqa_tables(shas: list[str]) -> dict[str, list[dict]]:
    documents = [
        {
            "doc_id": "d-text-1",
            "modality": "text",
            "text": "The tower is 300 m tall.",
            "image": None,
            "title": "Tower",
            "provenance": json.dumps({"kb": "wiki"}),
        },
        {
            "doc_id": "d-img-1",
            "modality": "image",
            "text": None,
            "image": shas[0],
            "title": "Tower photo",
            "provenance": json.dumps({"post": "p1"}),
        },
    ]
    kb = [{k: v for k, v in d.items() if k != "provenance"} for d in documents]
    kb.append({"doc_id": "kb-img-2", "modality": "image", "text": None, "image": shas[2], "title": "Other"})

    def sentence(
        i: int, text: str, cites: list[str], imgs: list[str], checkable: bool = True, flagged: bool = False
    ) -> dict:
        return {
            "index": i,
            "text": text,
            "fact_checkable": checkable,
            "text_citations": cites,
            "image_citations": imgs,
            "flagged": flagged,
        }

    qa = [
        {
            "sample_id": make_id("reddit", "p1"),
            "source_id": "p1",
            "question": "How tall is this tower?",
            "images": [shas[0]],
            "answer": "It is 300 m tall. Nice photo!",
            "sentences": [
                sentence(0, "It is 300 m tall.", ["d-text-1"], ["d-img-1"]),
                sentence(1, "Nice photo!", [], [], False),
            ],
            "meta": "{}",
        },
        {
            "sample_id": make_id("reddit", "p2"),
            "source_id": "p2",
            "question": "Where is it?",
            "images": [shas[1]],
            "answer": "Paris, probably.",
            "sentences": [sentence(0, "Paris, probably.", [], [], True, flagged=True)],
            "meta": "{}",
        },
    ]
    return {"qa": qa, "documents": documents, "knowledge_base": kb}


def reflvqa_draft(tables: dict[str, list[dict]], version: str = "1.0.0") -> ReleaseDraft:
    schemas = {"qa": QA_SCHEMA, "documents": DOCUMENTS_SCHEMA, "knowledge_base": KB_SCHEMA}
    ids = [r["sample_id"] for r in tables["qa"]]
    return ReleaseDraft(
        kind=REFLVQA,
        version=version,
        parent=None,
        tables={name: pa.Table.from_pylist(rows, schema=schemas[name]) for name, rows in tables.items()},
        ledger=ledger_table([Decision(s, "factcheck", "sentences_v1", "keep") for s in ids], run_id="r1"),
        quarantine=QUARANTINE.empty_table(),
        config={"reflvqa": {"seed": 0}},
        models=[{"role": "inspector", "name": "smollm2"}],
        judge={"name": "lexical"},
        components={"entailment": "lexical-overlap-v1"},
        source_files=[],
        counts={"per_stage": {}, "per_source": {}},
        statistics={"funnel": [{"stage": "ingest", "remaining": 2}]},
        seed=0,
    )


def reseal(release: Path, manifest: dict) -> None:
    """Rewrite the manifest with its file list and body sealed again, as a writer would."""
    files = {rel: file_entry(release / rel) for rel in manifest["files"]}
    manifest = {**manifest, "files": files, "sealed": sealed_digest(files)}
    manifest["sealed_body"] = body_digests(manifest)
    (release / MANIFEST).write_text(json.dumps(manifest))
