"""CRUISE on CRAG-MM turns with scripted models, a stub reranker and a scripted clock: the
query-aware summary and q || s (eq. 1-2), the image branch through the project's image index
(eq. 3), paragraph chunks, S_ret < tau_ret, the per-turn budget, earlier turns in context."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.specs import MadCutoff
from mmcurate.evaluation.cragmm.cruise import (
    IDK,
    PLAIN,
    Cruise,
    answer_conversations,
    answer_variants,
    cruise_steps,
    run_options,
    select_turns,
)
from mmcurate.retrieval.cragmm_search import ImageKG, ProjectSearch, Retriever, paragraphs
from mmcurate.retrieval.encoders import image_encoder

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
    return [
        {
            "when_all": [f"Question: {q}", "OUTSIDE KNOWLEDGE:"],
            "answer": f"OUTSIDE KNOWLEDGE: {external}\nTIME-SENSITIVE: {realtime}",
            **extra,
        }
    ]


def answers(q: str, with_context: str, without: str, seconds: float | None = None) -> list[dict]:
    extra = {} if seconds is None else {"seconds": seconds}
    return [
        {
            "when_all": [f"Question: {q}", "Evidence:"],
            "when_none": ["Proposed answer"],
            "answer": with_context,
            **extra,
        },
        {"when_all": [f"Question: {q}"], "when_none": ["Proposed answer", "Evidence:"], "answer": without},
    ]


def checks(q: str, consistent: str, cov: str) -> list[dict]:
    return [
        {"when_all": [f"Question: {q}", "Proposed answer 1"], "answer": consistent},
        {"when_all": [f"Question: {q}", "Proposed answer:"], "answer": cov},
    ]


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
    search = ProjectSearch(
        ImageKG(kg, image_encoder("descriptor"), world.root / "indexes", ["description", "caption", "summary"]), None
    )
    return Retriever(search, reranker, MadCutoff(), "image", k_recall=1)  # the exact image match


def test_paragraph_chunks_split_the_fields_on_newlines(kg: Path, world) -> None:
    index = ImageKG(kg, image_encoder("descriptor"), world.root / "indexes", ["description", "summary"])
    cat = index.search((kg / "images" / "skimage_chelsea.jpg").read_bytes(), 1)
    assert cat[0].title == "tabby cat" and cat[0].score == pytest.approx(1.0, abs=1e-5)
    assert [text for _, text in paragraphs(cat)] == [
        "The tabby is a domestic cat with a striped coat.",
        "Tabby cats are common house pets.",
        "A tabby cat has an M-shaped mark on its forehead.",
    ]


def test_cruise_turns_on_scripted_models(world, kg: Path, store: ImageStore) -> None:
    world.add(
        "vlm",
        [
            {
                "when_all": ["'what animal is this?'", "in a single sentence"],
                "answer": "A striped tabby cat on a chair.",
            },
            {
                "when_all": ["'how much does this coffee cost today?'", "in a single sentence"],
                "answer": "A cup of espresso.",
            },
        ],
        default=None,
    )
    world.add(
        "m",
        [
            # T1: retrieval with the image; the context answer agrees and the verifier is sure
            *router("what animal is this?", "yes", "no"),
            *answers("what animal is this?", "A tabby cat.", "A cat."),
            *checks("what animal is this?", "yes", "CONFIDENCE: 0.95"),
            # T2: time-sensitive; a paragraph survives the cutoff (0.3 >= 0.1) but S_ret 0.3 < tau_ret 0.5
            *router("how much does this coffee cost today?", "yes", "yes"),
            # T3: no outside knowledge: no summary, no retrieval, 1.0 needed without context
            *router("what colour is the cat?", "no", "no"),
            *answers("what colour is the cat?", "Brown.", "Brown."),
            *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0"),
            # T4: the answer with context takes 9 s: with the 3 s the clock gives its retrieval, over 10 s
            *router("who owns this cat?", "yes", "no"),
            *answers("who owns this cat?", "Its owner.", "Someone.", seconds=9.0),
        ],
        default=None,
    )
    rows = [
        turn(store, kg, "s1", 0, "what animal is this?", "skimage_chelsea"),
        turn(store, kg, "s2", 0, "how much does this coffee cost today?", "skimage_coffee"),
        turn(store, kg, "s3", 0, "what colour is the cat?", "skimage_chelsea"),
        turn(store, kg, "s4", 0, "who owns this cat?", "skimage_chelsea"),
    ]
    reranker = StubReranker()
    clock = Clock([0.0, 0.0, 0.0, 0.0, 0.0, 3.0])  # two readings per retrieval (s1, s2, s4): s4 takes 3 s
    system = Cruise("m", summariser="vlm", turn_seconds=10.0)
    out = answer_conversations(
        rows, world.pool, system, cruise_steps("cruise", retriever(world, kg, reranker), store.read, clock)
    )
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
    world.add(
        "m",
        [
            *router("how much does this coffee cost today?", "yes", "yes"),
            *answers("how much does this coffee cost today?", "Two euros.", "Two euros."),
            *checks("how much does this coffee cost today?", "yes", "CONFIDENCE: 0.95"),
        ],
        default=None,
    )
    rows = [turn(store, kg, "s2", 0, "how much does this coffee cost today?", "skimage_coffee")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    out = answer_conversations(rows, world.pool, Cruise("m", summariser="vlm", retrieval_gate="context"), steps)
    assert out.to_pylist()[0]["answer"] == "Two euros."


def test_a_late_turn_is_a_failure_whatever_the_step(world, kg, store) -> None:
    """The router alone takes 11 s: nothing more is asked; without a budget the turn is answered."""
    world.add(
        "m",
        [
            *router("what colour is the cat?", "no", "no", seconds=11.0),
            *answers("what colour is the cat?", "Brown.", "Brown."),
            *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0"),
        ],
        default=None,
    )
    rows = [turn(store, kg, "s3", 0, "what colour is the cat?", "skimage_chelsea")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    late = answer_conversations(rows, world.pool, Cruise("m", turn_seconds=10.0), steps).to_pylist()[0]
    assert (late["answer"], late["timed_out"]) == (None, True) and "after route" in late["reason"]
    free = answer_conversations(rows, world.pool, Cruise("m", turn_seconds=None), steps).to_pylist()[0]
    assert (free["answer"], free["timed_out"]) == ("Brown.", False)


TABLE_1_GOLD = {"s1-0": "A tabby cat.", "s2-0": "A tabby.", "s3-0": "Brown.", "s4-0": "A cat.", "s5-0": "Grey."}


def test_table_1_rows_answer_in_the_papers_order(world, kg, store) -> None:
    """Issue 43 item 1 (seed 001 Table 1, 3.4): removing CoV removes what lets an answer through.
    T1 grounded, the same answer both ways, sure; T2 grounded, worded differently, sure; T3 and
    T5 no outside knowledge (no context), CoV certain (T5 wrongly); T4 the judge finds the two
    answers inconsistent. Missing: w/o CoV & SC >= w/o CoV >= CRUISE >= RAG agent;
    hallucination: each ablation <= CRUISE <= RAG agent."""
    world.add("vlm", [], default="A striped tabby cat on a chair.")
    world.add(
        "m",
        [
            *router("what animal is this?", "yes", "no"),
            *answers("what animal is this?", "A tabby cat.", "A tabby cat."),
            *checks("what animal is this?", "yes", "CONFIDENCE: 0.95"),
            *router("what breed is it?", "yes", "no"),
            *answers("what breed is it?", "A tabby.", "A tabby cat breed."),
            *checks("what breed is it?", "yes", "CONFIDENCE: 0.9"),
            *router("what colour is the cat?", "no", "no"),
            {
                "when_all": ["Question: what colour is the cat?", "Evidence:", "striped coat"],
                "when_none": ["Proposed answer"],
                "answer": "Striped.",
            },
            *answers("what colour is the cat?", "Brown.", "Brown."),
            *checks("what colour is the cat?", "yes", "CONFIDENCE: 1.0"),
            *router("what is it?", "yes", "no"),
            *answers("what is it?", "A dog.", "A cat."),
            *checks("what is it?", "no", "CONFIDENCE: 1.0"),
            *router("what colour are its eyes?", "no", "no"),
            *answers("what colour are its eyes?", "Blue.", "Blue."),
            *checks("what colour are its eyes?", "yes", "CONFIDENCE: 1.0"),
        ],
        default=None,
    )
    rows = [
        turn(store, kg, f"s{n}", 0, q, "skimage_chelsea")
        for n, q in enumerate(
            [
                "what animal is this?",
                "what breed is it?",
                "what colour is the cat?",
                "what is it?",
                "what colour are its eyes?",
            ],
            start=1,
        )
    ]
    variants = ["cruise", "no-cov", "no-cov-no-consistency", "rag-agent"]
    out = answer_variants(
        rows,
        world.pool,
        Cruise("m", summariser="vlm"),
        "cruise",
        variants[1:],
        retriever(world, kg, StubReranker()),
        store.read,
        Clock([]),
    )
    got = {(r["variant"], r["sample_id"]): (r["answer"], r["reason"]) for r in out.to_pylist()}
    keys = sorted(TABLE_1_GOLD)
    answered = {v: [got[(v, k)][0] for k in keys] for v in variants}
    assert answered == {
        "cruise": ["A tabby cat.", "A tabby.", "Brown.", IDK, "Blue."],
        "no-cov": ["A tabby cat.", "A tabby.", IDK, IDK, IDK],
        "no-cov-no-consistency": ["A tabby cat.", IDK, IDK, IDK, IDK],
        "rag-agent": ["A tabby cat.", "A tabby.", "Striped.", "A dog.", "Blue."],
    }
    missing = {v: sum(a == IDK for a in answered[v]) for v in variants}
    wrong = {v: sum(a not in (IDK, TABLE_1_GOLD[k]) for k, a in zip(keys, answered[v])) for v in variants}
    assert missing["no-cov-no-consistency"] >= missing["no-cov"] >= missing["cruise"] >= missing["rag-agent"]
    assert missing["no-cov-no-consistency"] > missing["no-cov"] > missing["cruise"] > missing["rag-agent"]
    assert (
        wrong["no-cov-no-consistency"] <= wrong["cruise"] and wrong["no-cov"] <= wrong["cruise"] <= wrong["rag-agent"]
    )
    assert (wrong["no-cov"], wrong["cruise"], wrong["rag-agent"]) == (0, 1, 3)
    assert (
        got[("no-cov", "s3-0")][1] == "no context, and no verifier to vouch for an answer without it (ablation no-cov)"
    )
    assert got[("no-cov-no-consistency", "s2-0")][1].startswith("the answers with and without context differ")
    assert got[("rag-agent", "s3-0")][1] == "answer with context, unverified (ablation rag-agent)"
    traces = {(r["variant"], r["sample_id"]): json.loads(r["trace"]) for r in out.to_pylist()}
    assert traces[("rag-agent", "s3-0")]["checks"] == ["answer"]  # no router, no check
    assert traces[("rag-agent", "s3-0")]["context"]["retrieval"] == "yes"
    assert traces[("no-cov", "s2-0")]["checks"] == ["router", "answers", "consistency"]
    assert traces[("no-cov-no-consistency", "s1-0")]["checks"] == ["router", "answers"]


def test_the_vision_only_baseline_is_not_asked_to_decline(world, kg, store) -> None:
    """Issue 43 item 1: the baseline "attempts to answer all questions" (seed 001, L274)."""
    from mmcurate.evaluation.cragmm.harness import _request

    world.add("m", [], default="A horse.")
    rows = [turn(store, kg, "h", 0, "what animal is this?", "skimage_horse")]
    answer_conversations(rows, world.pool, Cruise("m"), cruise_steps(PLAIN, None, store.read, Clock([])))
    sent = world.pool.messages["m"][0]
    assert "decline" not in json.dumps(sent) and sent[-1]["content"][-1]["text"] == "Answer:"
    harness = _request({"question": "what animal is this?", "images": rows[0]["images"]})
    assert harness == sent  # the harness task asks what `evaluate --system plain` asks


def test_the_router_asks_both_flags_in_one_call(world, kg, store) -> None:
    """Issue 43 item 6 (seed 001, appendix A.1: one prompt, both decisions)."""
    world.add("vlm", [], default="A striped tabby cat on a chair.")
    world.add(
        "m",
        [
            *router("what animal is this?", "yes", "yes"),
            *answers("what animal is this?", "A cat.", "A cat."),
            *checks("what animal is this?", "yes", "CONFIDENCE: 0.95"),
        ],
        default=None,
    )
    rows = [turn(store, kg, "s1", 0, "what animal is this?", "skimage_chelsea")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    out = answer_conversations(rows, world.pool, Cruise("m", summariser="vlm"), steps).to_pylist()[0]
    routed = [key for _, key in world.sent["m"] if "router" in key or "external" in key or "realtime" in key]
    assert routed == ["s1-0/router"]
    router_trace = json.loads(out["trace"])["router"]
    assert (
        router_trace["needs_outside_knowledge"]["label"] == "yes" and router_trace["time_sensitive"]["label"] == "yes"
    )


@pytest.mark.parametrize(
    "reply, flags",
    [
        ("OUTSIDE KNOWLEDGE: yes\nTIME-SENSITIVE: no", ("yes", "no")),
        ("**Outside knowledge:** No\n**Time-sensitive:** Yes.\nbecause it asks about today", ("no", "yes")),
        ("1. OUTSIDE KNOWLEDGE: yes\n2. TIME-SENSITIVE: yes", ("yes", "yes")),
        ("TIME-SENSITIVE: no\nOUTSIDE KNOWLEDGE: yes", None),  # the order is part of the format
        ("OUTSIDE KNOWLEDGE: maybe\nTIME-SENSITIVE: no", None),
        ("yes", None),
    ],
)
def test_the_router_reply_is_read_strictly(reply: str, flags) -> None:
    from mmcurate.evaluation.verify_first import parse_router

    assert parse_router(reply) == flags


def test_later_turns_see_the_earlier_questions_and_answers(world, kg, store) -> None:
    world.add(
        "m",
        [
            {"when_all": ["Question: what animal is this?"], "answer": "A horse."},
            {"when_all": ["Question: how fast can it run?"], "answer": "55 km/h."},
        ],
        default=None,
    )
    rows = [
        turn(store, kg, "h", 1, "how fast can it run?", "skimage_horse"),
        turn(store, kg, "h", 0, "what animal is this?", "skimage_horse"),
    ]
    out = answer_conversations(rows, world.pool, Cruise("m"), cruise_steps(PLAIN, None, store.read, Clock([])))
    assert out["answer"].to_pylist() == ["55 km/h.", "A horse."]  # input order kept
    second = [m for m in world.pool.messages["m"] if "how fast" in json.dumps(m)][0]
    assert [msg["role"] for msg in second] == ["system", "user", "assistant", "user"]
    assert (second[1]["content"], second[2]["content"]) == ("what animal is this?", "A horse.")


def test_options_and_turn_selection() -> None:
    assert run_options({}) == {"system": "plain", "ablations": [], "task": None, "limit": None}
    assert run_options({"system": "cruise", "task": 3, "limit": 2}) == {
        "system": "cruise",
        "ablations": [],
        "task": "3",
        "limit": 2,
    }
    assert run_options({"system": "cruise", "ablations": ["rag-agent", "no-cov", "rag-agent"]})["ablations"] == [
        "rag-agent",
        "no-cov",
    ]
    for bad in (
        {"system": "verify-first"},
        {"task": "4"},
        {"limit": 0},
        {"ablations": ["no-cov"]},
        {"system": "cruise", "ablations": ["no-router"]},
    ):
        with pytest.raises(MmcurateError):
            run_options(bad)
    rows = [
        {"set": s, "session_id": c, "turn": t}
        for s, c, t in [
            ("multi_turn", "b", 1),
            ("multi_turn", "b", 0),
            ("multi_turn", "a", 0),
            ("single_turn", "x", 0),
            ("single_turn", "y", 0),
        ]
    ]
    assert [(r["session_id"], r["turn"]) for r in select_turns(rows, "3", 1)] == [("a", 0)]
    assert [(r["session_id"], r["turn"]) for r in select_turns(rows, None, None)] == [
        ("a", 0),
        ("b", 0),
        ("b", 1),
        ("x", 0),
        ("y", 0),
    ]
    assert [r["session_id"] for r in select_turns(rows, "1", 1)] == ["x"]


# Appendix A.2's wording (seed 001): a user may load it from a template file; the code never carries it.
PAPER_SUMMARY = {
    "summary_system": "You are an expert at describing images with a focus on details relevant to a specific question.",
    "summary_request": "A user is asking the following question about the image: '{query}'.\nPlease provide a "
    "one-sentence summary of the image, focusing on key elements, objects, and any text that might "
    "be relevant to answering the question.",
}


def test_no_sentence_of_the_papers_summary_prompt_is_in_the_code() -> None:
    """Issue 43 item 8: every prompt in our own words; the paper's text only from a user's file."""

    def words(text: str) -> str:  # a string literal split over lines still reads as its sentence
        return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())

    root = Path(__file__).resolve().parents[2]
    sentences = [
        words(s) for text in PAPER_SUMMARY.values() for s in re.split(r"'\{query\}'|\.", text) if len(s.split()) >= 5
    ]
    assert len(sentences) == 3
    found = []
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if parts[0] in ("tests", "build", ".venv", ".git") or path.suffix not in (".py", ".yaml", ".jsonl", ".j2"):
            continue
        text = words(path.read_text(errors="replace"))
        found += [f"{path.relative_to(root)}: {s}" for s in sentences if s in text]
    assert not found


def test_the_papers_summary_prompt_loads_from_a_template_file(world, kg, store, tmp_path) -> None:
    import yaml

    from mmcurate.benchmarks.cragmm import CruiseConfig
    from mmcurate.core.errors import ConfigError
    from mmcurate.evaluation.cragmm.cruise import BUILT_IN_SUMMARY, summary_prompt

    file = tmp_path / "paper-summary.yaml"
    file.write_text(yaml.safe_dump(PAPER_SUMMARY))
    section = CruiseConfig(image_index=kg, summary_prompt=file)
    section.read_files("cruise")
    prompt = summary_prompt(section.summary_prompt)
    assert prompt.id.startswith("cruise.summary.custom-") and prompt.id != BUILT_IN_SUMMARY.id
    assert prompt.source.startswith("paper-summary.yaml (sha256 ")
    world.add("vlm", [], default="A striped tabby cat on a chair.")
    world.add("m", [*router("what animal is this?", "yes", "no")], default="A cat.")
    rows = [turn(store, kg, "s1", 0, "what animal is this?", "skimage_chelsea")]
    steps = cruise_steps("cruise", retriever(world, kg, StubReranker()), store.read, Clock([]))
    answer_conversations(rows, world.pool, Cruise("m", summariser="vlm", summary=prompt), steps)
    sent = world.pool.messages["vlm"][0]
    assert sent[0]["content"] == PAPER_SUMMARY["summary_system"]
    assert sent[1]["content"][-1]["text"] == PAPER_SUMMARY["summary_request"].replace("{query}", "what animal is this?")

    file.write_text(yaml.safe_dump({"summary_request": "Describe the image."}))
    with pytest.raises(ConfigError, match=r"cruise\.summary_prompt: .*must hold \{query\}") as err:
        CruiseConfig(image_index=kg, summary_prompt=file).read_files("cruise")
    assert "\n" not in str(err.value)
