"""RefLVQA stage 4 (seed paper 3.3): supporting documents for every fact-checkable sentence.

For each fact-checkable sentence:

- text: the ``top_text`` nearest documents of the text corpus (KB specs, searched as one)
  from a FAISS index built once per corpus fingerprint and encoder (``resumable_index``: the
  embedding resumes after a kill and prints the same progress lines as the evaluation's),
  optionally cut by ``cutoff`` (``retrieval.cutoffs``: CRUISE's MAD rule or a fixed top-K,
  over the cosine scores of the search) before any is judged;
- images: the ``top_images`` nearest images of the image corpus, text-to-image, which needs
  a cross-modal encoder. Without one (or without an image corpus, or without an image
  entailment model to judge them) image citations are skipped and the result says why;
  nothing is faked.

A retrieved document is cited only when an entailment judge (``judging.entailment``) says
the document (premise) supports the sentence (hypothesis): for text, the judge of
``reflvqa.text_entailment``; for images, a vision model asked the same yes/no question
with the image part.

With a cutoff, each fact-checkable sentence gets a ``citation.cutoff`` row (verdict ``cut``
when some retrieved document was cut, else ``keep``; detail: the cutoff, theta, median, MAD,
the kept and cut document ids) and the counts ``cutoff_retrieved`` / ``cutoff_kept`` /
``cutoff_cut``. Every judged pair is a ledger row (check ``citation.text`` / ``citation.image``,
``context_id`` = doc id, verdict ``entail``/``reject``/``error``, model = the judge, detail
with the score). A judge failure is never a citation. A fact-checkable sentence left with
no citation is flagged (``flagged=True`` and a ``citation.flag`` ledger row).

Output ``kept``: the input samples with their ``sentences`` (``core.schema.SENTENCE``)
carrying the citations, and ``retrieved_text`` (``RETRIEVED``): per fact-checkable sentence,
the text documents it was judged against (what a later claim-level verification may use as
evidence; releases do not ship it). The whole retrieval corpus (text and image documents), which a
release ships as its knowledge base, is ``knowledge_base(...)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore, store_folder
from mmcurate.core.ledger import Decision
from mmcurate.core.schema import QUARANTINE, SENTENCE
from mmcurate.core.specs import CrossModalSpec, CutoffSpec, EntailmentSpec, KBSpec, Lexical, MiniLM, TextEncoderSpec
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.tables import rows_to_table
from mmcurate.judging.entailment import EntailmentJudge, LLMEntailment, Support, entailment_judge, image_support
from mmcurate.retrieval.cutoffs import apply_cutoff
from mmcurate.retrieval.encoders import TextEncoder, text_encoder
from mmcurate.retrieval.kb import image_doc_id, image_documents, kb_fingerprint, load_corpora
from mmcurate.retrieval.rag import passage
from mmcurate.retrieval.resumable_index import resumable_index
from mmcurate.retrieval.vector_index import top_hits

from .relevance import resolve_cross_modal

STAGE = "citation"
CHECK_TEXT = "citation.text"
CHECK_IMAGE = "citation.image"
CHECK_FLAG = "citation.flag"
CHECK_SAMPLE = "citation.sample"
CHECK_CUTOFF = "citation.cutoff"
IMAGE_CORPUS = "post-images"
RETRIEVED = pa.list_(
    pa.struct(
        [pa.field("index", pa.int32(), nullable=False), pa.field("doc_ids", pa.list_(pa.string()), nullable=False)]
    )
)


def images_fingerprint(shas: list[str]) -> str:
    return hashlib.sha256("\n".join(shas).encode("ascii")).hexdigest()


def knowledge_base(
    corpora: list[KBSpec],
    limit: int | None,
    images: list[str],
    titles: Mapping[str, str] | None = None,
    image_corpus: str = IMAGE_CORPUS,
) -> pa.Table:
    """The retrieval corpus a release ships: the text documents, then the image documents
    (``titles``: the title each image's source gives it, ``post_titles``)."""
    return pa.concat_tables([load_corpora(corpora, limit), image_documents(images, image_corpus, titles)])


def post_titles(candidates: pa.Table) -> dict[str, str]:
    """sha256 -> the title of the first candidate post (in table order) showing the image: the
    caption a Reddit post gives its images, which the evaluation's caption stand-ins read
    (retrieval.rag.source_caption). Only the posts' own images have one; a folder's have none."""
    titles: dict[str, str] = {}
    for row in candidates.select(["question", "images"]).to_pylist():
        for sha in row["images"]:
            titles.setdefault(sha, row["question"])
    return titles


def image_corpus(folder: Path | None, store: ImageStore, candidates: pa.Table) -> tuple[list[str], pa.Table]:
    """The image documents (sha256s in ``store``) and the quarantine rows of unusable files:
    every image under ``folder``, or without one the candidate posts' own images."""
    if folder is None:
        return sorted(
            {sha for shas in candidates["images"].to_pylist() for sha in shas if sha in store}
        ), QUARANTINE.empty_table()
    images, rejected = store_folder(store, folder)
    return images, rows_to_table([r.to_row("image_corpus") for r in rejected], QUARANTINE)


Wanted = tuple[dict[str, Any], int, str]  # (sample row, sentence index, sentence text)


@dataclass
class CiteDocuments(Stage):
    """Retrieve and entailment-check supporting documents for every fact-checkable sentence."""

    corpora: list[KBSpec]
    images: list[str] = field(default_factory=list)  # image sha256s in the store: the image corpus
    corpus_limit: int | None = None
    text_encoder: TextEncoderSpec | TextEncoder = MiniLM()
    cross_modal: CrossModalSpec | Any = None  # a spec, or a cross-modal encoder object
    top_text: int = 5
    top_images: int = 5
    text_entailment: EntailmentSpec | EntailmentJudge = Lexical()
    image_entailment: str | None = None  # a vision model of the config
    cutoff: CutoffSpec | None = None  # None: every one of the top_text documents is judged
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        if "sentences" not in samples.column_names:
            raise MmcurateError("the citation stage needs the fact-checkable stage's output (a 'sentences' column)")
        rows = samples.to_pylist()
        wanted: list[Wanted] = [(r, s["index"], s["text"]) for r in rows for s in r["sentences"] if s["fact_checkable"]]
        judge = entailment_judge(self.text_entailment, ctx.models.pool if ctx.models else None)
        decisions: list[Decision] = []
        counts = {
            "input": len(rows),
            "kept": len(rows),
            "sentences": len(wanted),
            "flagged": 0,
            "text_citations": 0,
            "image_citations": 0,
        }
        try:
            text_cites, judged, encoder = self._cite_text(ctx, wanted, judge, decisions, counts)
        finally:
            if isinstance(judge, LLMEntailment):
                judge.close()
        skipped = self._image_skip_reason(ctx)
        image_cites = self._cite_images(ctx, wanted, decisions) if skipped is None else {}

        column: list[list[dict]] = []
        for row in rows:
            sid = row["sample_id"]
            entries = []
            for s in row["sentences"]:
                key = (sid, s["index"])
                t, im = text_cites.get(key, []), image_cites.get(key, [])
                flagged = bool(s["fact_checkable"]) and not t and not im
                entries.append(
                    {
                        "index": s["index"],
                        "text": s["text"],
                        "fact_checkable": bool(s["fact_checkable"]),
                        "text_citations": t,
                        "image_citations": im,
                        "flagged": flagged,
                    }
                )
                counts["text_citations"] += len(t)
                counts["image_citations"] += len(im)
                if flagged:
                    counts["flagged"] += 1
                    decisions.append(
                        Decision(
                            sid,
                            STAGE,
                            CHECK_FLAG,
                            "flagged",
                            context_id=f"s{s['index']}",
                            detail={"sentence": s["index"], "reason": "no supporting document"},
                        )
                    )
            column.append(entries)
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_SAMPLE,
                    "keep",
                    model=judge.name,
                    detail={
                        "flagged": sum(e["flagged"] for e in entries),
                        "cited_sentences": sum(bool(e["text_citations"] or e["image_citations"]) for e in entries),
                        "image_citations": "skipped: " + skipped if skipped else "made",
                    },
                )
            )
        retrieved = [
            [
                {"index": s["index"], "doc_ids": judged.get((row["sample_id"], s["index"]), [])}
                for s in row["sentences"]
                if s["fact_checkable"]
            ]
            for row in rows
        ]
        kept = (
            samples.drop_columns([c for c in ("sentences", "retrieved_text") if c in samples.column_names])
            .append_column("sentences", pa.array(column, type=pa.list_(SENTENCE)))
            .append_column("retrieved_text", pa.array(retrieved, type=RETRIEVED))
        )
        image_judge = self.image_entailment if skipped is None else None
        cutoff = str(self.cutoff) if self.cutoff is not None else None
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={
                "text_judge": judge.name,
                "image_judge": image_judge,
                "image_skipped": skipped,
                "text_cutoff": cutoff,
            },
            components={
                "text_retriever": encoder,
                "text_cutoff": cutoff or "none",
                "text_entailment": judge.name,
                "image_entailment": image_judge or "none",
            },
        )

    def _cut(
        self,
        wanted: list[Wanted],
        hits: list[list[tuple[int, float]]],
        doc_ids: list[str],
        decisions: list[Decision],
        counts: dict[str, int],
    ) -> list[list[tuple[int, float]]]:
        """Each sentence's hits after the cutoff, with one ledger row per sentence."""
        if self.cutoff is None:
            return hits
        out = []
        for (row, i, _), found in zip(wanted, hits):
            cut = apply_cutoff(found, self.cutoff, scale="cosine")  # FAISS inner products of unit vectors
            kept = {pos for pos, _ in cut.kept}
            out.append([(pos, score) for pos, score in found if pos in kept])
            for name, value in (("retrieved", len(found)), ("kept", len(cut.kept)), ("cut", len(cut.cut))):
                counts[f"cutoff_{name}"] = counts.get(f"cutoff_{name}", 0) + value
            decisions.append(
                Decision(
                    row["sample_id"],
                    STAGE,
                    CHECK_CUTOFF,
                    "cut" if cut.cut else "keep",
                    context_id=f"s{i}",
                    detail={
                        "sentence": i,
                        **cut.detail,
                        "kept_ids": [doc_ids[p] for p, _ in cut.kept],
                        "cut_ids": [doc_ids[p] for p, _ in cut.cut],
                    },
                )
            )
        return out

    def _cite_text(
        self,
        ctx: StageContext,
        wanted: list[Wanted],
        judge: EntailmentJudge,
        decisions: list[Decision],
        counts: dict[str, int],
    ) -> tuple[dict[tuple[str, int], list[str]], dict[tuple[str, int], list[str]], str]:
        """Citations per (sample, sentence), the documents judged per sentence, the encoder name."""
        encoder = self.text_encoder if isinstance(self.text_encoder, TextEncoder) else text_encoder(self.text_encoder)
        kb = load_corpora(self.corpora, self.corpus_limit)
        doc_ids, titles, texts = (kb[c].to_pylist() for c in ("doc_id", "title", "text"))
        cites: dict[tuple[str, int], list[str]] = {}
        judged: dict[tuple[str, int], list[str]] = {}
        if not (wanted and doc_ids and self.top_text > 0):
            return cites, judged, encoder.name
        index = resumable_index(
            ctx.index_dir,
            "reflvqa-text",
            encoder.name,
            encoder.dim,
            kb_fingerprint(kb),
            doc_ids,
            [passage(t, x) for t, x in zip(titles, texts)],
            encoder.encode_text,
        )
        hits = self._cut(
            wanted,
            top_hits(index, encoder.encode_text([w[2] for w in wanted]), self.top_text),
            doc_ids,
            decisions,
            counts,
        )
        for (row, i, _), found in zip(wanted, hits):
            judged[(row["sample_id"], i)] = [doc_ids[pos] for pos, _ in found]
        pairs = [(w, rank, pos, score) for w, found in zip(wanted, hits) for rank, (pos, score) in enumerate(found, 1)]
        supports = (
            judge.judge(
                [passage(titles[p], texts[p]) for _, _, p, _ in pairs],
                [w[2] for w, _, _, _ in pairs],
                [f"{w[0]['sample_id']}/s{w[1]}/{doc_ids[p]}" for w, _, p, _ in pairs],
            )
            if pairs
            else []
        )
        for (w, rank, pos, retrieval), support in zip(pairs, supports):
            row, i, _ = w
            if support.verdict == "entail":
                cites.setdefault((row["sample_id"], i), []).append(doc_ids[pos])
            decisions.append(
                Decision(
                    row["sample_id"],
                    STAGE,
                    CHECK_TEXT,
                    support.verdict,
                    model=judge.name,
                    context_id=doc_ids[pos],
                    detail={
                        "sentence": i,
                        "score": support.score,
                        "rank": rank,
                        "retrieval_score": retrieval,
                        "encoder": encoder.name,
                        **support.detail,
                    },
                )
            )
        return cites, judged, encoder.name

    def _image_skip_reason(self, ctx: StageContext) -> str | None:
        """Why image citations cannot be made, or None (a misconfiguration raises)."""
        if self.image_entailment is None:
            return "no image entailment model configured"
        if self.cross_modal is None:
            return "no cross-modal encoder configured: text-to-image retrieval impossible"
        if not self.images:
            return "empty image corpus"
        if not ctx.pool.settings.model(self.image_entailment).vision:
            raise MmcurateError(f"image entailment model {self.image_entailment!r} cannot see images (vision: false)")
        return None

    def _cite_images(
        self, ctx: StageContext, wanted: list[Wanted], decisions: list[Decision]
    ) -> dict[tuple[str, int], list[str]]:
        assert self.image_entailment is not None
        image_ids = sorted({sha for sha in self.images if sha in ctx.store})
        cites: dict[tuple[str, int], list[str]] = {}
        if not (wanted and image_ids and self.top_images > 0):
            return cites
        encoder = resolve_cross_modal(self.cross_modal)
        index = resumable_index(
            ctx.index_dir,
            "reflvqa-images",
            encoder.name,
            encoder.dim,
            images_fingerprint(image_ids),
            image_ids,
            image_ids,
            lambda batch: encoder.encode_images([ctx.store.read(sha) for sha in batch]),
        )
        hits = top_hits(index, encoder.encode_text([w[2] for w in wanted]), self.top_images)
        pairs = [(w, rank, pos, score) for w, found in zip(wanted, hits) for rank, (pos, score) in enumerate(found, 1)]
        try:
            supports: list[Support] = (
                image_support(
                    ctx.pool,
                    self.image_entailment,
                    [image_ids[p] for _, _, p, _ in pairs],
                    [w[2] for w, _, _, _ in pairs],
                    [f"{w[0]['sample_id']}/s{w[1]}/{image_doc_id(image_ids[p])}" for w, _, p, _ in pairs],
                    STAGE,
                )
                if pairs
                else []
            )
        finally:
            ctx.pool.release(self.image_entailment)
        for (w, rank, pos, retrieval), support in zip(pairs, supports):
            row, i, _ = w
            doc = image_doc_id(image_ids[pos])
            if support.verdict == "entail":
                cites.setdefault((row["sample_id"], i), []).append(doc)
            decisions.append(
                Decision(
                    row["sample_id"],
                    STAGE,
                    CHECK_IMAGE,
                    support.verdict,
                    model=self.image_entailment,
                    context_id=doc,
                    detail={
                        "sentence": i,
                        "score": support.score,
                        "rank": rank,
                        "retrieval_score": retrieval,
                        "encoder": encoder.name,
                        **support.detail,
                    },
                )
            )
        return cites
