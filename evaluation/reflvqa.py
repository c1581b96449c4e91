"""A RAG run on a RefLVQA release: retrieve, answer with per-sentence citations, grade.

For each QA pair of the release:

1. retrieve from the release's own knowledge base (``retrieval.rag``: the ``candidates``
   nearest documents, reranked, the first ``top_k`` kept, or those a ``cutoff`` keeps, e.g.
   CRUISE's MAD rule; the question is the query);
2. the model answers with the documents numbered [1]..[K] and cites them per sentence
   (``reflvqa_prompts``); the citations are read strictly (``cited_answers``), with one retry
   and then a counted error (``models.labels.ask_parsed``);
3. the evaluators grade each answer (``graders``): groundedness per answer sentence against
   the documents it cites (0, without asking, when it cites none), completeness per
   fact-checkable and supported sentence of the dataset answer, relevance once.

The retrieval quality of the knowledge base itself is measured on the same rankings, with
the release's citations as relevance labels (``retrieval_metrics``): NDCG@10 and Recall@100
on the first-stage ranking, the first relevant rank (for Hit@K) on the reranked one.

Completeness is asked only for dataset sentences that are fact-checkable AND cite at least
one document: a flagged sentence (fact-checkable, but no document supports it) is not
something a system answering from the knowledge base can be expected to cover. Their
number is reported.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.specs import CutoffSpec
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest
from mmcurate.retrieval.rag import cut_ranking

from .cited_answers import CitedSentence, parse_cited_answer
from .graders import Grader, Unit
from .reflvqa_prompts import ANSWER_TEMPLATE, answer_messages, answer_reminder
from .retrieval_metrics import first_hit, ndcg_at_k, recall_at_k

STAGE = "evaluate.reflvqa"
ANSWERED, FAILED, UNREADABLE = "answered", "failed", "unreadable"
NO_CITATION = "rule:no-citation"  # the grader of a sentence that cites nothing (0, no call)
DEFAULT_TOP_K = 5
NDCG_K, RECALL_K = 10, 100  # the paper's Table 4, on the first-stage ranking whatever ``candidates`` is

HIT = pa.struct([pa.field("doc_id", pa.string()), pa.field("modality", pa.string()), pa.field("score", pa.float64())])
ANSWER_SENTENCE = pa.struct([pa.field("index", pa.int32()), pa.field("text", pa.string()),
                             pa.field("citations", pa.list_(pa.string()))])
ANSWERS = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("top_k", pa.int32(), nullable=False),
        pa.field("retrieved", pa.list_(HIT), nullable=False),  # shown to the model, as [1]..[K]
        pa.field("answer", pa.string()),  # the reply as given (the retry's when there was one)
        pa.field("sentences", pa.list_(ANSWER_SENTENCE), nullable=False),  # citations as doc ids
        pa.field("status", pa.string(), nullable=False),  # answered | failed | unreadable
        pa.field("error", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
    ]
)
GRADES = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("unit", pa.int32(), nullable=False),  # answer sentence / dataset sentence index; 0 for relevance
        pa.field("statement", pa.string(), nullable=False),
        pa.field("documents", pa.list_(pa.string()), nullable=False),  # groundedness: the cited documents
        pa.field("grade", pa.float64()),  # 1 / 0.5 / 0 (relevance 1..7); null: the evaluator failed
        pa.field("evaluator", pa.string(), nullable=False),
        pa.field("raw", pa.string()),
        pa.field("error", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
    ]
)
RETRIEVAL = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("relevant", pa.int32(), nullable=False),  # documents the release cites for the answer
        pa.field("ndcg_at_10", pa.float64()),  # null when nothing is relevant
        pa.field("recall_at_100", pa.float64()),
        pa.field("first_hit", pa.int32()),  # rank of the first relevant document after reranking
    ]
)


@dataclass
class RefLVQARun:
    answers: pa.Table  # ANSWERS
    grades: pa.Table  # GRADES
    retrieval: pa.Table  # RETRIEVAL
    counts: dict[str, int] = field(default_factory=dict)


def relevant_documents(row: Mapping[str, Any]) -> set[str]:
    """Every document the release cites for a sentence of the QA pair's answer."""
    return {d for s in row["sentences"] for d in (*s["text_citations"], *s["image_citations"])}


def completeness_statements(row: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(index, text) of the dataset sentences completeness is graded on (see the module docstring)."""
    return [(s["index"], s["text"]) for s in row["sentences"]
            if s["fact_checkable"] and (s["text_citations"] or s["image_citations"])]


def _shown(documents: Mapping[str, Mapping[str, Any]], hits: Sequence[Any], doc_chars: int) -> list[dict[str, Any]]:
    """The retrieved documents as numbered evidence, texts cut to ``doc_chars``."""
    out = []
    for hit in hits:
        doc = documents[hit.doc_id]
        text = (doc.get("text") or "")[:doc_chars] or None
        out.append({"context_id": hit.doc_id, "modality": doc["modality"], "text": text,
                    "image": doc.get("image"), "title": doc.get("title")})
    return out


def answer_with_citations(
    qa: Sequence[Mapping[str, Any]],
    shown: Sequence[list[dict[str, Any]]],
    pool: Any,  # models.client.ModelPool
    model: str,
    max_tokens: int,
) -> list[tuple[list[CitedSentence] | None, str | None, str | None]]:
    """(sentences, reply, error) per QA pair; sentences None when the call failed or the
    citations stayed unreadable."""
    by_count: dict[int, list[int]] = {}
    for i, docs in enumerate(shown):
        by_count.setdefault(len(docs), []).append(i)
    out: list[Any] = [None] * len(qa)
    try:
        client = pool.client(model)
        for count, positions in by_count.items():
            requests = [ChatRequest(key=qa[i]["sample_id"], template=ANSWER_TEMPLATE, max_tokens=max_tokens,
                                    messages=answer_messages(qa[i]["question"], qa[i]["images"], shown[i]))
                        for i in positions]
            replies = ask_parsed(client, requests, lambda text, n=count: parse_cited_answer(text, n),
                                 answer_reminder(count), STAGE, f"citations of documents 1-{count}")
            for i, reply in zip(positions, replies):
                out[i] = (reply.label, reply.raw[-1], reply.error)
    finally:
        pool.release(model)
    return out


def retrieval_rows(qa: Sequence[Mapping[str, Any]], first: Sequence[list[Any]],
                   ranked: Sequence[list[Any]]) -> list[dict[str, Any]]:
    """RETRIEVAL rows: NDCG@10 and Recall@100 of the first stage, the first relevant rank after reranking."""
    rows = []
    for row, before, after in zip(qa, first, ranked):
        relevant = relevant_documents(row)
        ids = [h.doc_id for h in before]
        rows.append({
            "sample_id": row["sample_id"], "relevant": len(relevant),
            "ndcg_at_10": ndcg_at_k(ids, relevant, NDCG_K) if relevant else None,
            "recall_at_100": recall_at_k(ids, relevant, RECALL_K) if relevant else None,
            "first_hit": first_hit([h.doc_id for h in after], relevant),
        })
    return rows


def grading_units(row: Mapping[str, Any], sentences: Sequence[CitedSentence], cited: Sequence[list[str]],
                  docs: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[tuple[int, Unit]]]:
    """What to grade for one answered question: (indices of the sentences citing nothing,
    which are 0 by rule; (unit index, unit) for the evaluators)."""
    sid = row["sample_id"]
    by_id = {d["context_id"]: d for d in docs}
    response = " ".join(s.text for s in sentences)
    uncited, units = [], []
    for i, (sentence, ids) in enumerate(zip(sentences, cited)):
        if ids:
            units.append((i, Unit(f"{sid}/g{i}", "groundedness", sentence.text, documents=tuple(by_id[d] for d in ids))))
        else:
            uncited.append(i)
    units += [(index, Unit(f"{sid}/c{index}", "completeness", text, response=response))
              for index, text in completeness_statements(row)]
    units.append((0, Unit(f"{sid}/r", "relevance", row["question"], response=response)))
    return uncited, units


def evaluate_reflvqa(
    qa: Sequence[Mapping[str, Any]],  # the release's qa rows, images as sha256
    documents: Mapping[str, Mapping[str, Any]],  # doc_id -> knowledge-base row (images as sha256)
    corpus: Any,  # retrieval.rag.RagCorpus
    pool: Any,
    model: str,
    graders: Mapping[str, Grader],  # metric -> evaluator
    top_k: int = DEFAULT_TOP_K,
    doc_chars: int = 2000,
    max_tokens: int = 512,
    run_id: str = "",
    cutoff: CutoffSpec | None = None,  # None: the fixed top_k
) -> RefLVQARun:
    """The whole run (see the module docstring)."""
    queries = [row["question"] for row in qa]
    ranked = corpus.rank(queries)
    retrieval = retrieval_rows(qa, corpus.first_stage(queries, max(RECALL_K, NDCG_K)), ranked)
    scale = corpus.score_scale if cutoff is not None else None  # a fixed top_k reads no score
    top = [cut_ranking(ranking, top_k, cutoff, scale) for ranking in ranked]
    shown = [_shown(documents, hits, doc_chars) for hits in top]
    replies = answer_with_citations(qa, shown, pool, model, max_tokens)

    answers: list[dict[str, Any]] = []
    units: list[tuple[str, int, Unit]] = []  # (sample_id, unit index, unit)
    by_rule: list[dict[str, Any]] = []
    for row, hits, docs, (sentences, reply, error) in zip(qa, top, shown, replies):
        sid = row["sample_id"]
        cited = [[hits[n - 1].doc_id for n in s.cites] for s in sentences or []]
        answers.append({
            "sample_id": sid, "model": model, "top_k": top_k,
            "retrieved": [{"doc_id": h.doc_id, "modality": h.modality, "score": h.score} for h in hits],
            "answer": reply, "error": error, "run_id": run_id,
            "status": ANSWERED if sentences is not None else (FAILED if reply is None else UNREADABLE),
            "sentences": [{"index": i, "text": s.text, "citations": ids}
                          for i, (s, ids) in enumerate(zip(sentences or [], cited))],
        })
        if sentences is None:
            continue
        uncited, mine = grading_units(row, sentences, cited, docs)
        by_rule += [{"sample_id": sid, "model": model, "metric": "groundedness", "unit": i,
                     "statement": sentences[i].text, "documents": [], "grade": 0.0, "evaluator": NO_CITATION,
                     "raw": None, "error": None, "run_id": run_id} for i in uncited]
        units += [(sid, index, unit) for index, unit in mine]

    grades = by_rule + _grade(units, graders, model, run_id)
    counts = {
        "questions": len(qa),
        "answered": sum(a["status"] == ANSWERED for a in answers),
        "failed_calls": sum(a["status"] == FAILED for a in answers),
        "unreadable_citations": sum(a["status"] == UNREADABLE for a in answers),
        "evaluator_errors": sum(g["grade"] is None for g in grades),
        "flagged_dataset_sentences": sum(1 for row in qa for s in row["sentences"] if s["flagged"]),
        "questions_without_relevant_documents": sum(r["relevant"] == 0 for r in retrieval),
    }
    return RefLVQARun(pa.Table.from_pylist(answers, schema=ANSWERS), pa.Table.from_pylist(grades, schema=GRADES),
                      pa.Table.from_pylist(retrieval, schema=RETRIEVAL), counts)


def kept_note(answers: pa.Table, cutoff: CutoffSpec | None, candidates: int) -> str | None:
    """How many documents the cutoff kept per question (None without a cutoff)."""
    if cutoff is None:
        return None
    kept = [len(hits) for hits in answers.column("retrieved").to_pylist()]
    if not kept:
        return f"cutoff {cutoff}: no question"
    return (f"cutoff {cutoff} on the {candidates} reranked candidates: documents kept per question min {min(kept)}, "
            f"mean {sum(kept) / len(kept):.2f}, max {max(kept)} ({kept.count(0)} of {len(kept)} questions kept none)")


def _grade(units: list[tuple[str, int, Unit]], graders: Mapping[str, Grader], model: str,
           run_id: str) -> list[dict[str, Any]]:
    """Each metric's units graded in one batch by its evaluator, as GRADES rows."""
    rows = []
    for metric, grader in graders.items():
        mine = [(sid, index, unit) for sid, index, unit in units if unit.metric == metric]
        grades = grader.grade([unit for _, _, unit in mine]) if mine else []
        for (sid, index, unit), grade in zip(mine, grades):
            rows.append({"sample_id": sid, "model": model, "metric": metric, "unit": index,
                         "statement": unit.statement, "documents": [d["context_id"] for d in unit.documents],
                         "grade": grade.value, "evaluator": grade.by, "raw": grade.raw, "error": grade.error,
                         "run_id": run_id})
    return rows
