"""CRAG scoring on a hand-made answer set: grades, 75-token truncation, the four rates."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from mmcurate.core.config import JudgeSpec, ModelSpec, Settings
from mmcurate.evaluation.crag import (
    MappedJudge,
    crag_judge,
    crag_markdown,
    crag_metrics,
    crag_score,
    token_counter,
    wordpiece,
)
from mmcurate.judging.simpleqa import LexicalJudge

FILLER = " ".join(["yes"] * 80)  # 80 word pieces


def table(make, rows):
    return make.table([make.sample(sid, question, gold) for sid, question, gold in rows])


def answers(samples, rows):
    """Evaluation rows by source id: (source_id, scenario, answer)."""
    ids = dict(zip(samples["source_id"].to_pylist(), samples["sample_id"].to_pylist()))
    return pa.Table.from_pylist(
        [{"sample_id": ids[sid], "scenario": scenario, "answer": answer} for sid, scenario, answer in rows]
    )


@pytest.fixture
def samples(make):
    return table(
        make,
        [
            ("s1", "Capital of France?", ["Paris"]),
            ("s2", "Who built it?", ["Gustave Eiffel"]),
            ("s3", "Year?", ["1889"]),
            ("s4", "Which river?", ["Seine"]),
        ],
    )


def test_lexical_mode_maps_simpleqa_grades_and_truncates(samples):
    results = answers(
        samples,
        [
            ("s1", "oracle", "Paris"),  # exact: perfect
            ("s2", "oracle", "I don't know"),  # refusal: missing
            ("s3", "oracle", "It was finished in 1901."),  # wrong: incorrect
            ("s4", "oracle", f"The Seine. {FILLER}"),  # the gold is in the first 75 tokens: perfect
            ("s4", "realistic", f"{FILLER} The Seine."),  # the gold only after token 75: incorrect
            ("s1", "realistic", None),  # a failed call
        ],
    )
    scored = crag_score(results, samples, MappedJudge(LexicalJudge()), wordpiece())
    rows = scored.to_pylist()
    assert [r["crag_grade"] for r in rows] == ["perfect", "missing", "incorrect", "perfect", "incorrect", "failed"]
    assert [r["crag_score"] for r in rows] == [1.0, 0.0, -1.0, 1.0, -1.0, None]
    assert [r["crag_judged_by"] for r in rows][:3] == ["prejudge.exact", "prejudge.refusal", "lexical.containment"]
    assert [r["answer_tokens"] for r in rows] == [1, 5, 6, 83, 83, None]
    assert [r["truncated"] for r in rows] == [False, False, False, True, True, None]
    assert rows[4]["judged_answer"] == " ".join(["yes"] * 75)  # a prefix of the answer, cut at token 75
    assert rows[3]["judged_answer"] == "The Seine. " + " ".join(["yes"] * 72)

    metrics = {r["scenario"]: r for r in crag_metrics(scored).to_pylist()}
    oracle = metrics["oracle"]
    assert (oracle["graded"], oracle["n_perfect"], oracle["n_missing"], oracle["n_incorrect"]) == (4, 2, 1, 1)
    assert oracle["accuracy"] == 0.5 and oracle["missing"] == 0.25 and oracle["hallucination"] == 0.25
    assert oracle["truthfulness"] == 0.25
    # the failed call counts as missing: the rates are over both realistic queries
    realistic = metrics["realistic"]
    assert (realistic["n"], realistic["graded"], realistic["n_failed"]) == (2, 1, 1)
    assert (realistic["accuracy"], realistic["missing"], realistic["hallucination"]) == (0.0, 0.5, 0.5)
    assert realistic["truthfulness"] == -0.5
    text = crag_markdown(crag_metrics(scored))
    assert "| oracle | 50.00 | 25.00 | 25.00 | 25.00 | 25.00 | 4 | 0 | 0 / 0 |" in text
    assert "| realistic | 0.00 | 50.00 | 50.00 | -50.00 | -50.00 | 2 | 0 | 1 / 0 |" in text


def test_llm_judge_grades_acceptable_and_errors_strictly(world, samples, tmp_path):
    world.add(
        "grader",
        [
            {"when_all": ["Answer to grade: Eiffel"], "answer": "B"},  # acceptable
            {"when_all": ["Answer to grade: the Seine river"], "answer": "**A**"},
            {"when_all": ["Answer to grade: 1890", "could not be read"], "answer": "D."},
            {"when_all": ["Answer to grade: 1890"], "answer": "D) because it is wrong"},
            {"when_all": ["Answer to grade: no clue really"], "answer": "it is missing"},
        ],
        default=None,
    )
    settings = Settings(models=world.specs, judge=JudgeSpec(kind="llm", model="grader"))
    judge = crag_judge(settings, world.pool)
    results = answers(
        samples,
        [
            ("s1", "oracle", "Paris"),
            ("s2", "oracle", "Eiffel"),
            ("s3", "oracle", "1890"),
            ("s4", "oracle", "the Seine river"),
            ("s2", "oracle", "no clue really"),
        ],
    )
    scored = crag_score(results, samples, judge, token_counter(settings))
    assert scored["crag_grade"].to_pylist() == ["perfect", "acceptable", "incorrect", "perfect", "judge_error"]
    assert scored["crag_judged_by"].to_pylist() == ["prejudge.exact"] + ["llm:grader"] * 4
    metrics = crag_metrics(scored).to_pylist()[0]
    # over all 5 queries, the judge error counted as missing: (2 perfect + 1 acceptable) / 5 = 0.6;
    # 1 incorrect: 0.2; missing 1 / 5; truthfulness 0.4; the four-level mean score 0.3
    assert (metrics["n"], metrics["graded"], metrics["n_judge_errors"]) == (5, 4, 1)
    assert metrics["accuracy"] == 0.6 and metrics["hallucination"] == 0.2 and metrics["missing"] == 0.2
    assert metrics["truthfulness"] == pytest.approx(0.4)
    assert metrics["mean_score"] == pytest.approx((1 + 0.5 - 1 + 1 + 0) / 5)


TABLE_1 = {  # CRUISE (seed 001) Table 1, Task 1 local evaluation: accuracy, missing, hallucination, truthfulness
    "LLaMA Vision Only": (25.00, 15.38, 59.62, -34.62),
    "RAG Agent": (27.88, 9.62, 62.50, -34.62),
    "w/o CoV & Self-Consistency": (3.85, 95.19, 0.96, 2.88),
    "w/o CoV": (4.81, 95.19, 0.0, 4.81),
    "Ours": (14.42, 82.69, 2.88, 11.54),
}
GRADES_104 = {  # scripted grades over 104 queries that give each row; some correct answers acceptable
    "LLaMA Vision Only": {"perfect": 20, "acceptable": 6, "missing": 14, "timed_out": 2, "incorrect": 62},
    "RAG Agent": {"perfect": 25, "acceptable": 4, "missing": 9, "failed": 1, "incorrect": 65},
    "w/o CoV & Self-Consistency": {"perfect": 3, "acceptable": 1, "missing": 99, "incorrect": 1},
    "w/o CoV": {"perfect": 5, "missing": 99},
    "Ours": {"perfect": 13, "acceptable": 2, "missing": 80, "timed_out": 6, "incorrect": 3},
}


def test_crag_accounting_reconstructs_cruise_table_1():
    """Issue 32 item 12: an acceptable answer counts in accuracy, so every row of Table 1 sums to 100
    and truthfulness = accuracy - hallucination; the four-level mean score is its own column."""
    rows = [
        {"system": system, "crag_grade": grade}
        for system, grades in GRADES_104.items()
        for grade, k in grades.items()
        for _ in range(k)
    ]
    metrics = {r["system"]: r for r in crag_metrics(pa.Table.from_pylist(rows), by=("system",)).to_pylist()}
    for system, cells in TABLE_1.items():
        row = metrics[system]
        assert row["n"] == 104
        got = tuple(round(100 * row[r], 2) for r in ("accuracy", "missing", "hallucination", "truthfulness"))
        assert got == cells, system
        assert sum(cells[:3]) == pytest.approx(100, abs=0.011)
    ours = metrics["Ours"]
    assert ours["n_timed_out"] == 6  # counted in its own column and in missing
    assert ours["mean_score"] == pytest.approx((13 + 0.5 * 2 - 3) / 104)
    text = crag_markdown(crag_metrics(pa.Table.from_pylist(rows), by=("system",)), ("system",), timed=True)
    assert "Mean score (1 / 0.5 / 0 / -1) (%)" in text and "Timed out (as missing)" in text
    assert "| Ours | 14.42 | 82.69 | 2.88 | 11.54 | 10.58 | 104 | 2 | 0 / 0 | 6 |" in text


def test_a_timed_out_turn_is_not_judged_and_counts_as_missing(samples):
    """Issue 32 item 13: a turn over the budget is a failure of its own kind, not an answer."""
    results = answers(samples, [("s1", "oracle", "Paris"), ("s2", "oracle", "Gustave Eiffel")])
    results = results.append_column("timed_out", pa.array([False, True]))
    scored = crag_score(results, samples, MappedJudge(LexicalJudge()), wordpiece())
    assert scored["crag_grade"].to_pylist() == ["perfect", "timed_out"]
    row = crag_metrics(scored).to_pylist()[0]
    assert (row["n_timed_out"], row["n_failed"], row["missing"], row["accuracy"]) == (1, 0, 0.5, 0.5)


def test_rates_add_up_to_100_over_all_queries(samples):
    """CRUISE's Table 1 rows sum to 100: failed calls and judge errors stay in the denominator."""
    results = answers(
        samples,
        [
            ("s1", "oracle", "Paris"),
            ("s2", "oracle", None),
            ("s3", "oracle", "1901"),
            ("s4", "oracle", "I don't know"),
            ("s1", "oracle", None),
        ],
    )
    scored = crag_score(results, samples, MappedJudge(LexicalJudge()), wordpiece())
    row = crag_metrics(scored).to_pylist()[0]
    assert row["n"] == 5 and row["n_failed"] == 2
    assert row["accuracy"] + row["missing"] + row["hallucination"] == pytest.approx(1.0)
    assert (row["accuracy"], row["missing"], row["hallucination"]) == (0.2, 0.6, 0.2)


def test_the_judge_models_tokenizer_counts_when_it_has_one(tmp_path, world):
    vocab = {"[UNK]": 0, "one": 1, "two": 2}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    spec = ModelSpec(name="grader", backend="scripted", script=tmp_path / "x.jsonl", tokenizer=tmp_path)
    with_tokenizer = Settings(models={"grader": spec}, judge=JudgeSpec(kind="llm", model="grader"))
    counter = token_counter(with_tokenizer)
    assert counter.name == f"tokenizer:{tmp_path / 'tokenizer.json'}"
    assert counter.cut("one two one, two", 3) == ("one two one", 5)  # the comma is a token of its own
    # no tokenizer on the judge's spec, or the lexical judge: the word-piece rule
    assert token_counter(Settings()).name.startswith("wordpiece:")
    assert wordpiece().cut("Gustave Eiffel", 2) == ("Gustave E", 4)  # gustave e ##iff ##el
