"""A RAG run on a RefLVQA release: the seed paper's evaluation grid (004, section 4, Table 5;
section 6.2, Table 7).

For each N of ``queries`` and each setting of ``settings`` (``settings``: TextRAG,
ImageRAG, MultiRAG, Two-step MultiRAG), for each QA pair of the release:

1. the model under test writes N search queries from the question and its image
   (``queries``: read strictly, one retry, then the pair is excluded and counted);
   the queries of one N serve every setting;
2. each query retrieves from the release's own knowledge base (``retrieval.rag``: the
   ``candidates`` nearest documents of the setting's modalities, reranked, the first
   ``top_k`` kept, or those a ``cutoff`` keeps, e.g. CRUISE's MAD rule); the N x K documents
   in query order, as retrieved (``duplicates``), are the pair's documents;
3. the model answers citing them per sentence (``answers``: one answer, or Two-step's
   two answers and their combination; ``grounding``: section 6.2's CoT, Self-Refine
   and captioning on ImageRAG's documents), read strictly with one retry;
4. the evaluators grade each answer (``graders``): groundedness per answer sentence against
   the documents it cites (0, without asking, when it cites none), completeness per
   fact-checkable and supported sentence of the dataset answer, relevance once.

The retrieval quality of the knowledge base itself (Table 4, Figure 3) is measured per set
of modalities a setting searches, with the question as the query (as the paper measures its
retrievers) and the release's citations of those modalities as relevance labels
(``retrieval_metrics``): NDCG@10 and Recall@100 on the first-stage ranking, the first
relevant rank (for Hit@K) on the reranked one.

Completeness is asked only for dataset sentences that are fact-checkable AND cite at least
one document: a flagged sentence (fact-checkable, but no document supports it) is not
something a system answering from the knowledge base can be expected to cover. Their
number is reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig
from mmcurate.core.errors import MmcurateError
from mmcurate.core.plural import counted
from mmcurate.retrieval.rag import BOTH, IMAGE, TEXT, Hit, retrieve

from ..retrieval_metrics import first_hit, ndcg_at_k, recall_at_k
from .answers import ANSWERED, FAILED, UNREADABLE, Answer, Answering, answer_once, answer_two_step, shown
from .graders import INVALID_CITATION, NO_CITATION, Grader, Unit
from .grounding import answer_captioned, answer_cot, answer_self_refine
from .queries import write_queries
from .settings import (
    DEFAULT_QUERIES,
    GRID,
    IMAGE_CAPTION,
    IMAGE_COT,
    IMAGE_GROUNDING,
    IMAGE_SELF_REFINE,
    PAPER_NAMES,
    TWO_STEP,
    pooled,
    searched,
    split,
)
from .subset import VERIFIED_SENTENCES

STAGE = "evaluate.reflvqa"
CELL = ("setting", "n_queries")  # what a run chooses (``evaluation.runs``): answers and grades
SEARCHED_CELL = ("searched",)  # retrieval rows: per set of modalities searched
NDCG_K, RECALL_K = 10, 100  # the paper's Table 4, on the first-stage ranking whatever ``candidates`` is

HIT = pa.struct(
    [
        pa.field("doc_id", pa.string()),
        pa.field("modality", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("caption", pa.string()),
    ]
)  # Two-step: the caption shown beside an image document
ANSWER_SENTENCE = pa.struct(
    [
        pa.field("index", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("citations", pa.list_(pa.string())),
        pa.field("invalid_citations", pa.list_(pa.int32())),
    ]
)  # numbers of no shown document
STEP = pa.struct([pa.field("step", pa.string()), pa.field("answer", pa.string()), pa.field("error", pa.string())])
ANSWERS = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("setting", pa.string(), nullable=False),  # text | image | multi | two-step
        pa.field("n_queries", pa.int32(), nullable=False),  # N
        pa.field("top_k", pa.int32(), nullable=False),  # K, per query
        pa.field("queries", pa.list_(pa.string()), nullable=False),  # the model's search queries
        pa.field("retrieved", pa.list_(HIT), nullable=False),  # shown to the model, as [1]..[D]
        pa.field("answer", pa.string()),  # the final reply as given (the retry's when there was one)
        pa.field("steps", pa.list_(STEP), nullable=False),  # Two-step: the text and image answers
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
        pa.field("setting", pa.string(), nullable=False),
        pa.field("n_queries", pa.int32(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("unit", pa.int32(), nullable=False),  # answer sentence / dataset sentence index; 0 for relevance
        pa.field("statement", pa.string(), nullable=False),
        pa.field("documents", pa.list_(pa.string()), nullable=False),  # groundedness: the cited documents
        pa.field("grade", pa.float64()),  # 1 / 0.5 / 0 (relevance 1..7); null: the evaluator failed
        pa.field("evaluator", pa.string(), nullable=False),
        pa.field("raw", pa.string()),
        pa.field("reasoning", pa.string()),  # the evaluator's explanation before its label (004 Tables 11-12)
        pa.field("error", pa.string()),
        pa.field("run_id", pa.string(), nullable=False),
    ]
)
RETRIEVAL = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("searched", pa.string(), nullable=False),  # text | image | text+image
        pa.field("relevant", pa.int32(), nullable=False),  # documents of those modalities the release cites
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
    score_average: str = "per_answer"  # evaluation.reflvqa.score_average: how the table averages sentence grades


def searched_name(modalities: Sequence[str]) -> str:
    return "+".join(modalities)


def relevant_documents(row: Mapping[str, Any], modalities: Sequence[str] = BOTH) -> set[str]:
    """Every document of ``modalities`` the release cites for a sentence of the QA pair's answer."""
    return {d for s in row["sentences"] for modality in modalities for d in s[f"{modality}_citations"]}


def completeness_statements(row: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(index, text) of the dataset sentences completeness is graded on (see the module
    docstring); in the human-verified subset, its verified sentences (``subset``)."""
    verified = row.get(VERIFIED_SENTENCES)
    if verified is not None:
        return [(s["index"], s["text"]) for s in row["sentences"] if s["index"] in verified]
    return [
        (s["index"], s["text"])
        for s in row["sentences"]
        if s["fact_checkable"] and (s["text_citations"] or s["image_citations"])
    ]


def searched_sets(settings: Sequence[str], two_step_documents: str) -> list[tuple[str, ...]]:
    """The rankings a grid reads, each once, in the settings' order."""
    return list(dict.fromkeys(m for s in settings for m in searched(s, two_step_documents)))


def check_cutoff(corpus: Any, cfg: RefLVQAEvalConfig, settings: Sequence[str]) -> None:
    """A cutoff needs a score scale: refuse, before any call, a grid that fuses text and image rankings."""
    if cfg.cutoff is None:
        return
    fused = [searched_name(m) for m in searched_sets(settings, cfg.two_step_documents) if corpus.score_scale(m) is None]
    if fused:
        raise MmcurateError(
            f"cutoff {cfg.cutoff}: the {', '.join(fused)} ranking fuses text and image rankings by "
            "reciprocal rank (fusion: rrf), which has no score scale to cut on; leave "
            "evaluation.reflvqa.cutoff unset (the fixed top_k), set fusion: rerank, or run text and "
            "image settings only"
        )


def retrieval_rows(qa: Sequence[Mapping[str, Any]], corpus: Any, sets: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """RETRIEVAL rows per set of modalities: NDCG@10 and Recall@100 of the first stage, the
    first relevant rank after reranking, the question (with its images) as the query."""
    questions, images = [row["question"] for row in qa], [row["images"] for row in qa]
    rows = []
    for modalities in sets:
        first = corpus.first_stage(questions, modalities, images, max(RECALL_K, NDCG_K))
        ranked = corpus.rank(questions, modalities, images)
        for row, before, after in zip(qa, first, ranked):
            relevant = relevant_documents(row, modalities)
            ids = [h.doc_id for h in before]
            rows.append(
                {
                    "sample_id": row["sample_id"],
                    "searched": searched_name(modalities),
                    "relevant": len(relevant),
                    "ndcg_at_10": ndcg_at_k(ids, relevant, NDCG_K) if relevant else None,
                    "recall_at_100": recall_at_k(ids, relevant, RECALL_K) if relevant else None,
                    "first_hit": first_hit([h.doc_id for h in after], relevant),
                }
            )
    return rows


def grading_units(
    row: Mapping[str, Any],
    sentences: Sequence[tuple[str, list[str], list[int]]],
    docs: Sequence[Mapping[str, Any]],
    key: str,
) -> tuple[list[tuple[int, str]], list[tuple[int, Unit]]]:
    """What to grade for one answered question: ((index, rule) of the sentences citing no
    shown document, which are 0 by rule: ``NO_CITATION``, or ``INVALID_CITATION`` when all
    they cite is no shown document; (unit index, unit) for the evaluators, a sentence with
    the shown documents it cites). ``key`` prefixes unit keys."""
    by_id = {d["context_id"]: d for d in docs}
    response = " ".join(text for text, *_ in sentences)
    uncited, units = [], []
    for i, (text, ids, invalid) in enumerate(sentences):
        if ids:
            units.append(
                (i, Unit(f"{key}/g{i}", "groundedness", text, documents=tuple(by_id[d] for d in dict.fromkeys(ids))))
            )
        else:
            uncited.append((i, INVALID_CITATION if invalid else NO_CITATION))
    units += [
        (index, Unit(f"{key}/c{index}", "completeness", text, response=response))
        for index, text in completeness_statements(row)
    ]
    units.append((0, Unit(f"{key}/r", "relevance", row["question"], response=response)))
    return uncited, units


def _retrieved(
    rows: Sequence[Mapping[str, Any]],
    queries: Sequence[tuple[str, ...]],
    corpus: Any,
    modalities: Sequence[str],
    cfg: RefLVQAEvalConfig,
) -> list[list[Hit]]:
    """Per question the documents of its queries (top K each, pooled), one retrieval batch."""
    texts: list[str] = []
    images: list[Any] = []
    owner: list[int] = []
    for j, (row, mine) in enumerate(zip(rows, queries)):
        texts += mine
        images += [row["images"]] * len(mine)
        owner += [j] * len(mine)
    grouped: list[list[list[Hit]]] = [[] for _ in rows]
    for j, hits in zip(owner, retrieve(texts, corpus, cfg.top_k, cfg.cutoff, modalities, images)):
        grouped[j].append(hits)
    return [pooled(g, cfg.duplicates == "merge") for g in grouped]


def _answers(
    answering: Answering,
    setting: str,
    rows: Sequence[Mapping[str, Any]],
    lists: Mapping[tuple[str, ...], list[list[Hit]]],
    cfg: RefLVQAEvalConfig,
) -> list[Answer]:
    if setting == IMAGE_COT:
        return answer_cot(answering, rows, lists[(IMAGE,)])
    if setting == IMAGE_SELF_REFINE:
        return answer_self_refine(answering, rows, lists[(IMAGE,)], cfg.self_refine_rounds, cfg.self_refine_stop)
    if setting == IMAGE_CAPTION:
        return answer_captioned(answering, rows, lists[(IMAGE,)])
    if setting != TWO_STEP:
        return answer_once(answering, rows, lists[searched(setting)[0]])
    if cfg.two_step_documents == "shared":
        parts = [split(hits) for hits in lists[BOTH]]
        return answer_two_step(answering, rows, [t for t, _ in parts], [i for _, i in parts])
    return answer_two_step(answering, rows, lists[(TEXT,)], lists[(IMAGE,)])


def evaluate_reflvqa(
    qa: Sequence[Mapping[str, Any]],  # the release's qa rows, images as sha256
    documents: Mapping[str, Mapping[str, Any]],  # doc_id -> knowledge-base row (images as sha256)
    corpus: Any,  # retrieval.rag.RagCorpus
    pool: Any,
    model: str,
    graders: Mapping[str, Grader],  # metric -> evaluator
    cfg: RefLVQAEvalConfig,
    settings: Sequence[str] = GRID,
    queries: Sequence[int] = DEFAULT_QUERIES,
    run_id: str = "",
) -> RefLVQARun:
    """The whole grid (see the module docstring)."""
    check_cutoff(corpus, cfg, settings)
    sets = searched_sets(settings, cfg.two_step_documents)
    retrieval = retrieval_rows(qa, corpus, sets)
    answering = Answering(
        pool, model, documents, cfg.doc_chars, cfg.answer_max_tokens, cfg.captioner, cfg.caption_max_tokens
    )
    answers: list[dict[str, Any]] = []
    graded: list[tuple[str, int, Mapping[str, Any], Answer]] = []
    try:
        for n in queries:
            written = write_queries(qa, n, pool, model, cfg.query_max_tokens)
            ready = [i for i, label in enumerate(written) if label.ok]
            rows, mine = [qa[i] for i in ready], [written[i].label for i in ready]
            lists = {m: _retrieved(rows, mine, corpus, m, cfg) for m in sets}
            for setting in settings:
                cell = replace(answering, stage=f"{STAGE}.{setting}.n{n}")
                got = dict(zip(ready, _answers(cell, setting, rows, lists, cfg)))
                for i, row in enumerate(qa):
                    label = written[i]
                    answer = got.get(i) or Answer(
                        [],
                        None,
                        None,
                        FAILED if label.raw[-1] is None else UNREADABLE,
                        f"search queries: {label.error}",
                    )
                    answers.append(_answer_row(row, model, setting, n, cfg.top_k, label.label or (), answer, run_id))
                    if answer.status == ANSWERED:
                        graded.append((setting, n, row, answer))
    finally:
        pool.release(model)
        if cfg.captioner is not None:
            pool.release(cfg.captioner)

    units: list[tuple[str, int, str, int, Unit]] = []  # (setting, n, sample_id, unit index, unit)
    by_rule: list[dict[str, Any]] = []
    for setting, n, row, answer in graded:
        sid = row["sample_id"]
        assert answer.sentences is not None  # answered
        uncited, mine = grading_units(row, answer.sentences, shown(answering, answer.hits), f"{setting}/{n}/{sid}")
        by_rule += [
            {
                "sample_id": sid,
                "model": model,
                "setting": setting,
                "n_queries": n,
                "metric": "groundedness",
                "unit": i,
                "statement": answer.sentences[i][0],
                "documents": [],
                "grade": 0.0,
                "evaluator": rule,
                "raw": None,
                "reasoning": None,
                "error": None,
                "run_id": run_id,
            }
            for i, rule in uncited
        ]
        units += [(setting, n, sid, index, unit) for index, unit in mine]
    grades = by_rule + _grade(units, graders, model, run_id)
    answered, graded_rows = pa.Table.from_pylist(answers, schema=ANSWERS), pa.Table.from_pylist(grades, schema=GRADES)
    return RefLVQARun(
        answered,
        graded_rows,
        pa.Table.from_pylist(retrieval, schema=RETRIEVAL),
        tally(qa, answered, graded_rows),
        cfg.score_average,
    )


def tally(qa: Sequence[Mapping[str, Any]], table: pa.Table, grade_rows: pa.Table) -> dict[str, int]:
    """The counts of a run's table from its rows (so also of several runs' rows in one folder):
    per N the questions excluded at the query step (no readable queries: no answer asked), then
    the answers requested and what became of them."""
    answers, grades = table.to_pylist(), grade_rows.select(["grade"]).to_pylist()
    counts = {"questions": len(qa)}
    for n in sorted({a["n_queries"] for a in answers}):
        excluded = {a["sample_id"]: a["status"] for a in answers if a["n_queries"] == n and not a["queries"]}
        counts[f"queries_unreadable_n{n}"] = sum(status == UNREADABLE for status in excluded.values())
        counts[f"queries_failed_n{n}"] = sum(status == FAILED for status in excluded.values())
        counts[f"questions_excluded_at_query_step_n{n}"] = len(excluded)
    requested = [a for a in answers if a["queries"]]  # a question excluded at the query step asks for no answer
    counts.update(
        {
            "answers_requested": len(requested),
            "answered": sum(a["status"] == ANSWERED for a in requested),
            "failed_calls": sum(a["status"] == FAILED for a in requested),
            "unreadable": sum(a["status"] == UNREADABLE for a in requested),
            "answers_with_invalid_citations": sum(any(s["invalid_citations"] for s in a["sentences"]) for a in answers),
            "evaluator_errors": sum(g["grade"] is None for g in grades),
            "flagged_dataset_sentences": sum(1 for row in qa for s in row["sentences"] if s["flagged"]),
        }
    )
    two_step = [a for a in answers if a["setting"] == TWO_STEP and a["status"] == ANSWERED]
    if two_step:
        counts["two_step_answers_combined"] = sum(len(a["steps"]) == 2 for a in two_step)
        counts["two_step_image_documents_without_caption"] = sum(
            1 for a in two_step for h in a["retrieved"] if h["modality"] == IMAGE and h["caption"] is None
        )
    captioned = [a for a in answers if a["setting"] == IMAGE_CAPTION and a["status"] == ANSWERED]
    if captioned:
        counts["image_caption_documents_without_caption"] = sum(
            1 for a in captioned for h in a["retrieved"] if h["caption"] is None
        )
    refined = [a for a in answers if a["setting"] == IMAGE_SELF_REFINE and a["status"] == ANSWERED]
    if refined:
        counts["self_refine_answers_refined"] = sum(
            any(s["step"] == "answer 1" and s["error"] is None for s in a["steps"]) for a in refined
        )
        # a round that failed ended the refinement; the answer is the last readable one (grounding)
        counts["self_refine_rounds_failed"] = sum(
            any(s["step"] != "answer 0" and s["error"] is not None for s in a["steps"]) for a in refined
        )
    return counts


def empty_note(run: RefLVQARun) -> str | None:
    """Why every metric is empty, when it is: no question got readable search queries (no
    answer was asked for), or no answer was readable."""
    if run.counts.get("answered", 0):
        return None
    if not run.counts.get("answers_requested", 0):
        excluded = {k: v for k, v in run.counts.items() if k.startswith("questions_excluded_at_query_step_n")}
        per_n = ", ".join(f"N = {k.rsplit('_n', 1)[1]}: {v}" for k, v in excluded.items())
        return (
            f"no answer was requested: every question was excluded at the query step ({per_n} of "
            f"{run.counts.get('questions', 0)} questions), so every metric is empty"
        )
    return "no answer had readable citations: every metric is empty"


def _answer_row(
    row: Mapping[str, Any],
    model: str,
    setting: str,
    n: int,
    top_k: int,
    queries: Sequence[str],
    answer: Answer,
    run_id: str,
) -> dict[str, Any]:
    return {
        "sample_id": row["sample_id"],
        "model": model,
        "setting": setting,
        "n_queries": n,
        "top_k": top_k,
        "queries": list(queries),
        "retrieved": [
            {"doc_id": h.doc_id, "modality": h.modality, "score": h.score, "caption": answer.captions.get(h.doc_id)}
            for h in answer.hits
        ],
        "answer": answer.reply,
        "steps": answer.steps,
        "status": answer.status,
        "error": answer.error,
        "sentences": [
            {"index": i, "text": text, "citations": ids, "invalid_citations": invalid}
            for i, (text, ids, invalid) in enumerate(answer.sentences or [])
        ],
        "run_id": run_id,
    }


def kept_note(answers: pa.Table, cutoff: Any, candidates: int) -> str | None:
    """How many documents the cutoff kept per question and query, per setting (None without a cutoff)."""
    if cutoff is None:
        return None
    parts = []
    groups: dict[tuple[str, int], list[float]] = {}
    for row in answers.select(["setting", "n_queries", "retrieved", "queries"]).to_pylist():
        if row["queries"]:
            groups.setdefault((row["setting"], row["n_queries"]), []).append(
                len(row["retrieved"]) / len(row["queries"])
            )
    for (setting, n), kept in groups.items():
        parts.append(
            f"{setting} N={n}: min {min(kept):.2f}, mean {sum(kept) / len(kept):.2f}, max {max(kept):.2f} "
            f"({kept.count(0)} of {counted(len(kept), 'question')} kept none)"
        )
    return f"cutoff {cutoff} on the {candidates} reranked candidates, documents kept per question and query: " + (
        "; ".join(parts) if parts else "no question"
    )


def _grade(
    units: list[tuple[str, int, str, int, Unit]], graders: Mapping[str, Grader], model: str, run_id: str
) -> list[dict[str, Any]]:
    """Each metric's units graded in one batch by its evaluator, as GRADES rows."""
    rows = []
    for metric, grader in graders.items():
        mine = [u for u in units if u[4].metric == metric]
        grades = grader.grade([unit for *_, unit in mine]) if mine else []
        for (setting, n, sid, index, unit), grade in zip(mine, grades):
            rows.append(
                {
                    "sample_id": sid,
                    "model": model,
                    "setting": setting,
                    "n_queries": n,
                    "metric": metric,
                    "unit": index,
                    "statement": unit.statement,
                    "documents": [d["context_id"] for d in unit.documents],
                    "grade": grade.value,
                    "evaluator": grade.by,
                    "raw": grade.raw,
                    "reasoning": grade.reasoning,
                    "error": grade.error,
                    "run_id": run_id,
                }
            )
    return rows


def settings_by_searched(settings: Sequence[str], two_step_documents: str) -> dict[str, list[str]]:
    """Each set of modalities the grid searches -> the settings (Table 5 names) that read it."""
    out: dict[str, list[str]] = {}
    for setting in settings:
        for modalities in searched(setting, two_step_documents):
            out.setdefault(searched_name(modalities), []).append(PAPER_NAMES[setting])
    return out


def reading_notes(cfg: RefLVQAEvalConfig, settings: Sequence[str]) -> list[str]:
    """Which reading of the paper each open choice of this run took (``evaluation.reflvqa``)."""
    average = (
        "Mean, @1.0 and @0.5 per answer, then the mean over answers (004 section 4.2)"
        if cfg.score_average == "per_answer"
        else "Mean, @1.0 and @0.5 over the sentence grades of all answers pooled (a long answer weighs more)"
    )
    duplicates = (
        "the N x K documents as retrieved, each with its own number (004 section 4)"
        if cfg.duplicates == "keep"
        else "the N x K documents once each, a document several queries found merged (in query order)"
    )
    fusion = (
        "one reranking stage scores text and image candidates on one scale and keeps the top K by score, "
        "004 section 5.1"
        if cfg.fusion == "rerank"
        else "MultiRAG fuses the text ranking and the image ranking by reciprocal rank into one list"
    )
    notes = [
        f"readings: the model writes N search queries from the question and its image (read strictly, one "
        f"retry, else the question is excluded); each query retrieves K = {cfg.top_k} documents "
        f"{'(the paper: 5)' if cfg.top_k != 5 else '(as the paper)'}; duplicates: {cfg.duplicates} "
        f"({duplicates}); fusion: {cfg.fusion} ({fusion}); "
        f"score_average: {cfg.score_average} ({average}; Mean = @1.0 + 0.5 x (@0.5 - @1.0) either way); "
        f"query_embedding: {cfg.query_embedding}"
    ]
    grounding = [PAPER_NAMES[s] for s in settings if s in IMAGE_GROUNDING]
    if grounding:
        notes.append(
            f"{', '.join(grounding)} (section 6.2, Table 7: N = 1, K = 5): ImageRAG's documents; CoT thinks "
            "between <thinking> tags before answering; Self-Refine scores its answer on Table 18's three "
            f"traits and refines it until the combined score reaches {cfg.self_refine_stop} or "
            f"{cfg.self_refine_rounds} feedback rounds were given; Captioning follows each image document "
            "with its caption"
        )
    captions = (
        f"captions by {cfg.captioner}, written for each question"
        if cfg.captioner
        else "no captioning model configured: an image document is shown with the caption its source gives "
        "it (title, alt text), a stand-in, or a line saying it has none"
    )
    if TWO_STEP in settings:
        documents = (
            "MultiRAG's documents split by modality, as Table 5 retrieves the same for both"
            if cfg.two_step_documents == "shared"
            else "TextRAG's and ImageRAG's documents"
        )
        notes.append(f"Two-step: two_step_documents: {cfg.two_step_documents} ({documents}); {captions}")
    if IMAGE_CAPTION in settings:
        notes.append(f"ImageRAG + Captioning: {captions}")
    return notes
