"""CRUISE on CRAG-MM turns with scripted models, a stub reranker and a scripted clock: the
query-aware summary and q || s (eq. 1-2), the image branch through the project's image index
(eq. 3), paragraph chunks, S_ret < tau_ret, the per-turn budget, earlier turns in context."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.core.images import ImageStore
from mmcurate.core.specs import MadCutoff
from mmcurate.evaluation.cruise import (
    IDK, PLAIN, Cruise, answer_conversations, answer_variants, cruise_steps, run_options, select_turns,
)
from mmcurate.retrieval.cragmm_search import ImageKG, ProjectSearch, Retriever, paragraphs
from mmcurate.retrieval.encoders import image_encoder
from mmcurate.core.errors import MmcurateError

SCORES = {  # the stub reranker's score of each paragraph (anything else: 0.05)
    "The tabby is a domestic cat with a striped coat.": 0.9,
    "Tabby cats are common house pets.": 0.4,
    "A tabby cat has an M-shaped mark on its forehead.": 0.2,
    "Espresso is a concentrated coffee brewed under pressure.": 0.3,
}


class StubReranker:
    name = "stub-reranker"

    def __init__(self) -> None:
        self.queries: list[str] = []

    def scores(self, query: str, passages: list[str]) -> list[float]:
        self.queries.append(query)
        return [SCORES.get(p, 0.05) for p in passages]


class Clock:
    """A scripted clock: each reading advances by the next step (seconds)."""

    def __init__(self, steps: list[float]) -> None:
        self.now, self.steps = 0.0, list(steps)

    def __call__(self) -> float:
        self.now += self.steps.pop(0) if self.steps else 0.0
        return self.now


def router(q: str, external: str, realtime: str, seconds: float | None = None) -> list[dict]:
    extra = {} if seconds is None else {"seconds": seconds}
    return [{"when_all": [f"Question: {q}", "beyond what the image"], "answer": external, **extra},
            {"when_all": [f"Question: {q}", "time-sensitive"], "answer": realtime}]


def answers(q: str, with_context: str, without: str, seconds: float | None = None) -> list[dict]:
    extra = {} if seconds is None else {"seconds": seconds}
    return [{"when_all": [f"Question: {q}", "Evidence:"], "when_none": ["Proposed answer"], "answer": with_context,
             **extra},
            {"when_all": [f"Question: {q}"], "when_none": ["Proposed answer", "Evidence:"], "answer": without}]


def checks(q: str, consistent: str, cov: str) -> list[dict]:
    return [{"when_all": [f"Question: {q}", "Proposed answer 1"], "answer": consistent},
            {"when_all": [f"Question: {q}", "Proposed answer:"], "answer": cov}]


@pytest.fixture
def kg(fixtures_root: Path) -> Path:
    return fixtures_root / "cragmm" / "image_kg"


@pytest.fixture
def store(world, kg: Path) -> ImageStore:
    return ImageStore(world.root / "images")


def turn(store: ImageStore, kg: Path, session: str, n: int, question: str, image: str) -> dict:
    sha = store.put((kg / "images" / f"{image}.jpg").read_bytes())
    return {"sample_id": f"{session}-{n}", "question": question, "images": [sha], "session_id": session, "turn": n}


def retriever(world, kg: Path, reranker: StubReranker) -> Retriever:
    search = ProjectSearch(ImageKG(kg, image_encoder("descriptor"), world.root / "indexes",
                                   ["description", "caption", "summary"]), None)
    return Retriever(search, reranker, MadCutoff(), "image", k_recall=1)  # the exact image match


def test_paragraph_chunks_split_the_fields_on_newlines(kg: Path, world) -> None:
    index = ImageKG(kg, image_encoder("descriptor"), world.root / "indexes", ["description", "summary"])
    cat = index.search((kg / "images" / "skimage_chelsea.jpg").read_bytes(), 1)
    assert cat[0].title == "tabby cat" and cat[0].score == pytest.approx(1.0, abs=1e-5)
    assert [text for _, text in paragraphs(cat)] == [
        "The tabby is a domestic cat with a striped coat.", "Tabby cats are common house pets.",
        "A tabby cat has an M-shaped mark on its forehead."]


def test_cruise_turns_on_scripted_models(world, kg: Path, store: ImageStore) -> None:
    world.add("vlm", [{"when_all": ["'what animal is this?'", "one-sentence summary"],
                       "answer": "A striped tabby cat on a chair."},
                      {"when_all": ["'how much does this coffee cost today?'", "one-sentence summary"],
                       "answer": "A cup of espresso."}], default=None)
    world.add("m", [
        # T1: retrieval with the image; the context answer agrees and the verifier is sure
        *router("what animal is this?", "yes", "no"), *answers("what animal is this?", "A tabby cat.", "A cat."),
        *checks("what animal is this?", "yes", "CONFIDENCE: 0.95"),
        # T2: time-sensitive; a paragraph survives the cutoff (0.3 >= 0.1) but S_ret 0.3 < tau_ret 0.5
        *router("how much does this coffee cost today?", "yes", "yes"),
        # T3: no outside knowledge: no summary, no retrieval, 1.0 needed without context
        *router("what colour is the cat?", "no", "no"), *answers("what colour is the cat?", "Brown.", "Brown."),
        *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0"),
        # T4: the answer with context takes 9 s: with the 3 s the clock gives its retrieval, over 10 s
        *router("who owns this cat?", "yes", "no"),
        *answers("who owns this cat?", "Its owner.", "Someone.", seconds=9.0),
    ], default=None)
    rows = [turn(store, kg, "s1", 0, "what animal is this?", "skimage_chelsea"),
            turn(store, kg, "s2", 0, "how much does this coffee cost today?", "skimage_coffee"),
            turn(store, kg, "s3", 0, "what colour is the cat?", "skimage_chelsea"),
            turn(store, kg, "s4", 0, "who owns this cat?", "skimage_chelsea")]
    reranker = StubReranker()
    clock = Clock([0.0, 0.0, 0.0, 0.0, 0.0, 3.0])  # two readings per retrieval (s1, s2, s4): s4 takes 3 s
    system = Cruise("m", summariser="vlm", turn_seconds=10.0)
    out = answer_conversations(rows, world.pool, system, cruise_steps("cruise", retriever(world, kg, reranker),
                                                                       store.read, clock))
    got = {r["sample_id"]: r for r in out.to_pylist()}

    t1 = json.loads(got["s1-0"]["trace"])
    assert got["s1-0"]["answer"] == "A tabby cat." and got["s1-0"]["abstained"] is False
    assert t1["summary"]["text"] == "A striped tabby cat on a chair."
    assert t1["context"]["query"] == "what animal is this? A striped tabby cat on a chair."  # q || s
    assert reranker.queries[0] == "what animal is this? A striped tabby cat on a chair."  # eq. 4 scores against q'
    assert (t1["context"]["used"], t1["context"]["score"]) == (3, 0.9)  # MAD keeps .9 .4 .2; S_ret .9
    assert got["s1-0"]["retrieval_score"] == 0.9 and got["s1-0"]["n_context"] == 3
    sent = [m for m in world.pool.messages["m"] if "Evidence:" in json.dumps(m) and "what animal" in json.dumps(m)]
    assert "[1] Info 1: The tabby is a domestic cat with a striped coat." in json.dumps(sent[0])

    assert got["s2-0"]["answer"] == IDK and got["s2-0"]["n_context"] == 1, got["s2-0"]["trace"]
    assert got["s2-0"]["reason"] == "time-sensitive question and retrieval score 0.3 below tau_ret 0.5"

    t3 = json.loads(got["s3-0"]["trace"])
    assert got["s3-0"]["answer"] == "Brown." and "summary" not in t3
    assert t3["context"] == {"retrieval": "skipped by the router", "used": 0} and got["s3-0"]["retrieval_score"] == 0.0

    # a failure, not an "I don't know" answer (issue 32 item 13)
    assert got["s4-0"]["answer"] is None and got["s4-0"]["abstained"] is None and got["s4-0"]["timed_out"] is True
    assert got["s4-0"]["reason"].startswith("over the 10 s turn budget after answer")
    assert got["s4-0"]["seconds"] == pytest.approx(12.0, abs=0.01)
    assert json.loads(got["s4-0"]["trace"])["timed_out"]["after"] == "answer"
    assert not any(key.startswith("s4-0/consistent") or key.startswith("s4-0/cov") for _, key in world.sent["m"])
    assert not any(r["timed_out"] for k, r in got.items() if k != "s4-0")
    summaries = [key for _, key in world.sent["vlm"]]
    assert "s3-0/summary" not in summaries and "s1-0/summary" in summaries


def test_the_context_reading_answers_what_the_score_reading_refuses(world, kg, store) -> None:
    world.add("vlm", [], default="A cup of espresso.")
    world.add("m", [*router("how much does this coffee cost today?", "yes", "yes"),
                    *answers("how much does this coffee cost today?", "Two euros.", "Two euros."),
                    *checks("how much does this coffee cost today?", "yes", "CONFIDENCE: 0.95")], default=None)
    rows = [turn(store, kg, "s2", 0, "how much does this coffee cost today?", "skimage_coffee")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    out = answer_conversations(rows, world.pool, Cruise("m", summariser="vlm", retrieval_gate="context"), steps)
    assert out.to_pylist()[0]["answer"] == "Two euros."


def test_a_late_turn_is_a_failure_whatever_the_step(world, kg, store) -> None:
    """The router alone takes 11 s: nothing more is asked; without a budget the turn is answered."""
    world.add("m", [*router("what colour is the cat?", "no", "no", seconds=11.0),
                    *answers("what colour is the cat?", "Brown.", "Brown."),
                    *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0")], default=None)
    rows = [turn(store, kg, "s3", 0, "what colour is the cat?", "skimage_chelsea")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    late = answer_conversations(rows, world.pool, Cruise("m", turn_seconds=10.0), steps).to_pylist()[0]
    assert (late["answer"], late["timed_out"]) == (None, True) and "after route" in late["reason"]
    free = answer_conversations(rows, world.pool, Cruise("m", turn_seconds=None), steps).to_pylist()[0]
    assert (free["answer"], free["timed_out"]) == ("Brown.", False)


def test_each_ablation_removes_what_its_table_1_row_removes(world, kg, store) -> None:
    """Issue 32 item 14: one row each. T1 the judge finds the answers inconsistent; T2 consistent
    but the verifier is unsure; T3 the router sees no need to retrieve (the RAG agent retrieves
    anyway and the evidence leads it astray)."""
    world.add("vlm", [], default="A striped tabby cat on a chair.")
    world.add("m", [
        *router("what animal is this?", "yes", "no"), *answers("what animal is this?", "A tabby cat.", "A dog."),
        *checks("what animal is this?", "no", "CONFIDENCE: 0.95"),
        *router("what breed is it?", "yes", "no"), *answers("what breed is it?", "A tabby.", "A tabby."),
        *checks("what breed is it?", "yes", "CONFIDENCE: 0.5"),
        *router("what colour is the cat?", "no", "no"),
        {"when_all": ["Question: what colour is the cat?", "Evidence:", "striped coat"], "when_none": ["Proposed answer"],
         "answer": "Striped."},
        *answers("what colour is the cat?", "Brown.", "Brown."),
        *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0"),
    ], default=None)
    rows = [turn(store, kg, "s1", 0, "what animal is this?", "skimage_chelsea"),
            turn(store, kg, "s2", 0, "what breed is it?", "skimage_chelsea"),
            turn(store, kg, "s3", 0, "what colour is the cat?", "skimage_chelsea")]
    out = answer_variants(rows, world.pool, Cruise("m", summariser="vlm"), "cruise",
                          ["no-cov", "no-cov-no-consistency", "rag-agent"], retriever(world, kg, StubReranker()),
                          store.read, Clock([]))
    got = {(r["variant"], r["sample_id"]): (r["answer"], r["reason"]) for r in out.to_pylist()}
    assert [got[("cruise", k)][0] for k in ("s1-0", "s2-0", "s3-0")] == [IDK, IDK, "Brown."]
    assert got[("cruise", "s1-0")][1] == "the answers with and without context disagree"
    assert got[("cruise", "s2-0")][1] == "confidence 0.5 below 0.9 (with context)"
    assert [got[("no-cov", k)][0] for k in ("s1-0", "s2-0", "s3-0")] == [IDK, "A tabby.", "Brown."]
    assert [got[("no-cov-no-consistency", k)][0] for k in ("s1-0", "s2-0", "s3-0")] == [
        "A tabby cat.", "A tabby.", "Brown."]
    assert [got[("rag-agent", k)][0] for k in ("s1-0", "s2-0", "s3-0")] == ["A tabby cat.", "A tabby.", "Striped."]
    assert got[("rag-agent", "s3-0")][1] == "answer with context, unverified (ablation rag-agent)"
    traces = {(r["variant"], r["sample_id"]): json.loads(r["trace"]) for r in out.to_pylist()}
    assert traces[("rag-agent", "s3-0")]["checks"] == ["answer"]  # no router, no check
    assert traces[("rag-agent", "s3-0")]["context"]["retrieval"] == "yes"
    assert traces[("no-cov", "s2-0")]["checks"] == ["router", "answers", "consistency"]
    assert traces[("no-cov-no-consistency", "s2-0")]["checks"] == ["router", "answers"]


def test_later_turns_see_the_earlier_questions_and_answers(world, kg, store) -> None:
    world.add("m", [{"when_all": ["Question: what animal is this?"], "answer": "A horse."},
                    {"when_all": ["Question: how fast can it run?"], "answer": "55 km/h."}], default=None)
    rows = [turn(store, kg, "h", 1, "how fast can it run?", "skimage_horse"),
            turn(store, kg, "h", 0, "what animal is this?", "skimage_horse")]
    out = answer_conversations(rows, world.pool, Cruise("m"), cruise_steps(PLAIN, None, store.read, Clock([])))
    assert out["answer"].to_pylist() == ["55 km/h.", "A horse."]  # input order kept
    second = [m for m in world.pool.messages["m"] if "how fast" in json.dumps(m)][0]
    assert [msg["role"] for msg in second] == ["system", "user", "assistant", "user"]
    assert (second[1]["content"], second[2]["content"]) == ("what animal is this?", "A horse.")


def test_options_and_turn_selection() -> None:
    assert run_options({}) == {"system": "plain", "ablations": [], "task": None, "limit": None}
    assert run_options({"system": "cruise", "task": 3, "limit": 2}) == {"system": "cruise", "ablations": [],
                                                                        "task": "3", "limit": 2}
    assert run_options({"system": "cruise", "ablations": ["rag-agent", "no-cov", "rag-agent"]})["ablations"] == [
        "rag-agent", "no-cov"]
    for bad in ({"system": "verify-first"}, {"task": "4"}, {"limit": 0}, {"ablations": ["no-cov"]},
                {"system": "cruise", "ablations": ["no-router"]}):
        with pytest.raises(MmcurateError):
            run_options(bad)
    rows = [{"set": s, "session_id": c, "turn": t} for s, c, t in [
        ("multi_turn", "b", 1), ("multi_turn", "b", 0), ("multi_turn", "a", 0), ("single_turn", "x", 0),
        ("single_turn", "y", 0)]]
    assert [(r["session_id"], r["turn"]) for r in select_turns(rows, "3", 1)] == [("a", 0)]
    assert [(r["session_id"], r["turn"]) for r in select_turns(rows, None, None)] == [
        ("a", 0), ("b", 0), ("b", 1), ("x", 0), ("y", 0)]
    assert [r["session_id"] for r in select_turns(rows, "1", 1)] == ["x"]
