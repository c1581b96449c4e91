"""RefLVQA stage 1 (seed paper 3.2): drop posts whose image is irrelevant to the question.

For each post, the question (post title) and the post's image(s) are embedded by a
cross-modal encoder together with ``n_distractors`` images drawn (seeded, per post) from
OTHER posts' images. An image's rank is 1 + the number of distractors more similar to the
question than it is. The post is kept when its best-ranked image has rank <= ``top_k``;
every sample (one per answer) of that post gets the post's verdict.

Without a cross-modal encoder the stage is skipped, never faked: every sample passes with
a ledger row verdict ``skipped`` and the result says ``skipped=True`` and why, so the
manifest and report can state that images were not relevance-filtered.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.plural import counted
from mmcurate.core.specs import CrossModalSpec, OpenClip
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.retrieval.encoders import CrossModalEncoder, cross_modal_encoder, normalise

STAGE = "relevance"
CHECK = "relevance.cross_modal_rank.v1"
SKIP_REASON = "no cross-modal encoder configured: image relevance was not filtered"


def post_key(row: dict[str, Any]) -> str:
    """The post a sample belongs to: meta.post_id, else source_id before '/', else question+images."""
    try:
        meta = json.loads(row.get("meta") or "{}")
    except json.JSONDecodeError:
        meta = {}
    if isinstance(meta, dict) and meta.get("post_id"):
        return f"post:{meta['post_id']}"
    source_id = row.get("source_id") or ""
    if "/" in source_id:
        return f"post:{source_id.split('/', 1)[0]}"
    return "qi:" + row["question"] + "\x1f" + "\x1f".join(row.get("images") or [])


def resolve_cross_modal(encoder: CrossModalSpec | str | CrossModalEncoder) -> CrossModalEncoder:
    """A cross-modal encoder from a spec, or an encoder object used as is."""
    if isinstance(encoder, (str, OpenClip)):
        return cross_modal_encoder(encoder)
    if not isinstance(encoder, CrossModalEncoder):
        raise MmcurateError("a cross-modal encoder needs name, encode_text and encode_images")
    return encoder


@dataclass
class ImageRelevance(Stage):
    """Keep a post when one of its images ranks within ``top_k`` for its question among
    ``n_distractors`` other posts' images; skipped (and said so) without an encoder."""

    encoder: CrossModalSpec | CrossModalEncoder | None
    n_distractors: int = 100
    top_k: int = 10
    seed: int = 0
    name = STAGE
    shardable = False  # distractor images come from every other post

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        encoder_spec, store, n_distractors, top_k, seed, run_id = (
            self.encoder,
            ctx.store,
            self.n_distractors,
            self.top_k,
            self.seed,
            ctx.run_id,
        )
        rows = samples.to_pylist()
        if encoder_spec is None:
            skipped = [Decision(r["sample_id"], STAGE, CHECK, "skipped", detail={"reason": SKIP_REASON}) for r in rows]
            counts = {"input": len(rows), "kept": len(rows), "dropped": 0, "skipped": len(rows)}
            return StageResult(
                stage=STAGE,
                kept=samples,
                decisions=skipped,
                run_id=run_id,
                counts=counts,
                skipped=True,
                reason=SKIP_REASON,
                components={"cross_modal_encoder": "none"},
            )
        if top_k < 1 or n_distractors < 0:
            raise MmcurateError(f"relevance needs top_k >= 1 and n_distractors >= 0 (got {top_k}, {n_distractors})")
        encoder = resolve_cross_modal(encoder_spec)

        posts: dict[str, list[int]] = defaultdict(list)
        keys_of = [post_key(row) for row in rows]
        for i, key in enumerate(keys_of):
            posts[key].append(i)
        post_images = {key: list(dict.fromkeys(rows[idx[0]]["images"] or [])) for key, idx in posts.items()}
        available = {sha for shas in post_images.values() for sha in shas if sha in store}

        verdicts: dict[str, tuple[str, dict[str, Any]]] = {}
        plans: dict[str, list[str]] = {}
        for key in sorted(posts):
            own = post_images[key]
            missing = [sha for sha in own if sha not in available]
            if not own:
                verdicts[key] = ("drop", {"reason": "post has no image"})
                continue
            if missing:
                verdicts[key] = (
                    "error",
                    {"reason": f"{counted(len(missing), 'image')} missing from the store", "missing": missing},
                )
                continue
            others = sorted(available - set(own))
            rng = random.Random(f"{seed}\x1f{key}")
            plans[key] = rng.sample(others, min(n_distractors, len(others)))

        if plans:
            wanted = sorted({sha for key in plans for sha in post_images[key] + plans[key]})
            vectors = normalise(encoder.encode_images([store.read(sha) for sha in wanted]))
            where = {sha: i for i, sha in enumerate(wanted)}
            keys = sorted(plans)
            queries = normalise(encoder.encode_text([rows[posts[k][0]]["question"] for k in keys]))
            for q, key in zip(queries, keys):
                own, distractors = post_images[key], plans[key]
                own_scores = vectors[[where[s] for s in own]] @ q
                dis_scores = vectors[[where[s] for s in distractors]] @ q if distractors else np.zeros(0)
                ranks = [int(1 + np.sum(dis_scores > score)) for score in own_scores]
                best = min(ranks)
                detail = {
                    "ranks": dict(zip(own, ranks)),
                    "best_rank": best,
                    "top_k": top_k,
                    "distractors": len(distractors),
                    "score": float(max(own_scores)),
                    "encoder": encoder.name,
                }
                if len(distractors) < n_distractors:
                    detail["note"] = f"only {len(distractors)} distractor images available"
                verdicts[key] = ("keep" if best <= top_k else "drop", detail)

        decisions: list[Decision] = []
        keep_mask: list[bool] = []
        for row, key in zip(rows, keys_of):  # one decision per sample, in input order
            verdict, detail = verdicts[key]
            keep_mask.append(verdict == "keep")
            decisions.append(Decision(row["sample_id"], STAGE, CHECK, verdict, model=encoder.name, detail=detail))
        kept = samples.filter(pa.array(keep_mask, type=pa.bool_()))
        counts = {
            "input": len(rows),
            "kept": kept.num_rows,
            "dropped": sum(1 for d in decisions if d.verdict == "drop"),
            "error": sum(1 for d in decisions if d.verdict == "error"),
            "posts": len(posts),
        }
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=run_id,
            counts=counts,
            extra={"encoder": encoder.name},
            components={"cross_modal_encoder": encoder.name},
        )
