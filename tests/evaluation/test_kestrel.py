"""Kestrel's loop on scripted models: the evidence from the grounder's geometry, claim-level
verification, the evidence-gated update, stateful rounds that go on after a contradiction,
the stop rules, the Yes-guard, strict replies; POPE's answer reading and metrics."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from mmcurate.annotation.grounders import BoxesGrounder, Grounder, ScriptedDetector
from mmcurate.benchmarks.pope import KestrelConfig
from mmcurate.benchmarks.shared import ClaimGate
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.evaluation.pope.kestrel import (
    Kestrel,
    KestrelItem,
    claimed_count,
    parse_initial,
    parse_refined,
    relation,
    where,
)
from mmcurate.evaluation.pope.probes import (
    kestrel_notes,
    kestrel_row,
    metrics,
    read_answer,
    run_options,
    write_pope_evaluation,
)
from mmcurate.models.labels import RecordError

W, H = 210, 120
REGIONS = [("dog", [10, 10, 60, 50]), ("cat", [150, 60, 200, 110])]  # dog top left, cat bottom right


def claim(name: str, kind: str = "existence", targets: list[str] | None = None, text: str | None = None) -> dict:
    return {"id": "c1", "type": kind, "text": text or f"There is a {name} in the image.", "targets": targets or [name]}


def init(answer: str, name: str, **kw) -> str:
    return json.dumps({"answer": answer, "verifiable_claims": [claim(name, **kw)]})


def refined(answer: str, name: str, **kw) -> str:
    return json.dumps({"new_claims": [{**claim(name, **kw), "priority": 1}], "Answer": answer})


def record(status: str, confidence: float, citations: list[str]) -> str:
    return json.dumps(
        {
            "verdict": status,
            "checked": [
                {
                    "claim_id": "c1",
                    "status": status,
                    "confidence": confidence,
                    "why": "scripted",
                    "citations": citations,
                }
            ],
        }
    )


def lvlm_rules(name: str, first: str, verify: list[dict], extra: list[dict] | None = None) -> list[dict]:
    """A scripted vision model: its first answer about ``name``, then the verifier's and
    the refiner's behaviour (propose No after a contradiction, Yes after support, else keep)."""
    question = f"Is there a {name} in the image?"
    return [
        *(extra or []),
        {"when_all": ["state one claim that can be checked", question], "answer": init(first, name)},
        *verify,
        {"when_all": ["cautious VQA assistant", question, "verdict: contradicted"], "answer": refined("No", name)},
        {"when_all": ["cautious VQA assistant", question, "verdict: supported"], "answer": refined("Yes", name)},
        {"when_all": ["cautious VQA assistant", question, "verdict: insufficient"], "answer": refined("No", name)},
    ]


@pytest.fixture
def lab(world, tmp_path):
    store = ImageStore(tmp_path / "images")
    buffer = io.BytesIO()
    Image.new("RGB", (W, H), (120, 160, 90)).save(buffer, format="PNG")
    sha = store.put(buffer.getvalue())
    (tmp_path / "regions.jsonl").write_text(
        "".join(
            json.dumps({"image": "x.png", "sha256": sha, "label": label, "box": box}) + "\n" for label, box in REGIONS
        )
    )

    class Lab:
        image = sha

        def run(
            self, name: str, rules: list[dict], config: KestrelConfig | None = None, grounder: Grounder | None = None
        ) -> KestrelItem:
            item = KestrelItem(f"k-{name}", sha, f"Is there a {name} in the image?", "existence", name)
            return self.run_item(item, rules, config, grounder)

        def run_item(
            self,
            item: KestrelItem,
            rules: list[dict],
            config: KestrelConfig | None = None,
            grounder: Grounder | None = None,
        ) -> KestrelItem:
            model = world.add("lvlm", rules, default=None)
            world.specs[model] = world.specs[model].model_copy(update={"vision": True})
            Kestrel(world.ctx(store=store), model, config or KestrelConfig(), grounder or BoxesGrounder(tmp_path)).run(
                [item]
            )
            return item

        def sent(self, stage: str = "kestrel") -> list[str]:
            return [key for s, key in world.sent["lvlm"] if s == stage]

        def texts(self) -> list[str]:
            return [
                "\n".join(
                    p.get("text", "")
                    for m in msgs
                    for p in (m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}])
                )
                for msgs in world.pool.messages["lvlm"]
            ]

    return Lab()


def found(name: str, n: int) -> str:
    return f"[e_count_{name}] The grounding agent found {n} instance"


def test_a_hallucinated_yes_is_corrected_and_the_rounds_go_on(lab) -> None:
    """A confident, cited contradiction opens the gate: the answer becomes No, and the loop does
    not stop there (Kestrel revises and verifies again); round 2 yields no stronger evidence (the
    same evidence, no more confidence), so it stops there (issue 32 item 16: 3.4's stop rule)."""
    item = lab.run(
        "cow",
        lvlm_rules(
            "cow",
            "Yes",
            [
                {
                    "when_all": ["strict verifier", found("cow", 0)],
                    "answer": record("contradicted", 0.95, ["e_count_cow"]),
                }
            ],
        ),
    )
    assert (item.initial, item.answer, item.stopped, len(item.rounds)) == ("Yes", "No", "no_stronger_evidence", 2)
    rounds = item.trace["rounds"]
    assert [(r["verdict"], r["gated"], r["answer_before"], r["answer_after"]) for r in rounds] == [
        ("contradicted", True, "Yes", "No"),
        ("contradicted", True, "No", "No"),
    ]
    assert rounds[0]["evidence"] == [
        {
            "id": "e_count_cow",
            "text": "The grounding agent found 0 instances of 'cow': no 'cow' was found in the image.",
        }
    ]
    texts = lab.texts()
    verify = [t for t in texts if "strict verifier" in t]
    assert "Previous verdict" not in verify[0] and "Previous verdict (round 1)" in verify[1]  # stateful
    refine = [t for t in texts if "cautious VQA assistant" in t]
    assert "Round history: []" in refine[0] and '"round": 1' in refine[1] and "Current answer: No" in refine[1]
    row = kestrel_row(
        {
            "sample_id": "k-cow",
            "dataset": "coco",
            "split": "random",
            "image": lab.image,
            "question_id": 1,
            "object": "cow",
            "question": "Is there a cow in the image?",
            "label": "no",
        },
        item,
    )
    assert (row["answer"], row["grade"], row["initial"], row["changed"], row["rounds"]) == (
        "no",
        "CORRECT",
        "Yes",
        True,
        2,
    )


def test_sam3s_thresholds_decide_what_the_detector_found(lab, tmp_path) -> None:
    """Issue 43 item 7: SAM3's thresholds as seed 000 gives them (4.1: "a confidence threshold of
    0.5 (with a recheck threshold of 0.35 when needed for existence claim)"): a dog scored 0.42
    is found by the existence recheck, a cat scored 0.3 is not found at all; a count claim gets
    no recheck; the trace says what the thresholds did."""
    rules = tmp_path / "rules.jsonl"
    rules.write_text(
        "".join(
            json.dumps({"sha256": lab.image, "label": label, "box": box, "stated": "hit", "score": score}) + "\n"
            for (label, box), score in zip(REGIONS, (0.42, 0.3))
        )
    )
    detector = ScriptedDetector(rules)
    verify = [{"when_all": ["strict verifier"], "answer": record("insufficient", 0.5, [])}]
    dog = lab.run("dog", lvlm_rules("dog", "Yes", verify), grounder=detector)
    assert found("dog", 1) in f"[e_count_dog] {dog.trace['rounds'][0]['evidence'][-1]['text']}"
    assert dog.trace["rounds"][0]["found"]["dog"] == {
        "instances": 1,
        "regions": ["dog"],
        "overlap": 1,
        "recheck_threshold": 0.35,
    }
    cat = lab.run("cat", lvlm_rules("cat", "Yes", verify), grounder=detector)
    assert cat.trace["rounds"][0]["found"]["cat"]["instances"] == 0
    assert cat.trace["rounds"][0]["found"]["cat"]["below_threshold"] == [0.3]
    counting = KestrelItem("k-count", lab.image, "Are there two dogs?", "count", "dog")
    counted = lab.run_item(
        counting,
        [
            {
                "when_all": ["state one claim that can be checked"],
                "answer": init("Yes", "dog", kind="count", text="There are 2 dogs."),
            },
            *verify,
        ],
        grounder=detector,
    )
    assert counted.trace["rounds"][0]["found"]["dog"]["instances"] == 0  # no recheck for a count claim
    lenient = lab.run("dog", lvlm_rules("dog", "Yes", verify), KestrelConfig(detection_threshold=0.4), detector)
    assert lenient.trace["rounds"][0]["found"]["dog"] == {"instances": 1, "regions": ["dog"], "overlap": 1}
    with pytest.raises(ValueError, match="recheck_threshold .* cannot exceed detection_threshold"):
        KestrelConfig(detection_threshold=0.3)
    assert KestrelConfig().detector_record() == {"detection_threshold": 0.5, "recheck_threshold": 0.35}
    cfg = KestrelConfig(grounding=f"detector:{rules}")
    [named, *_] = kestrel_notes(None, "m", cfg, detector)  # type: ignore[arg-type]  # the verifier is the model
    assert (
        "SAM3's thresholds (4.1): detection 0.5, existence recheck 0.35, applied to the instances the grounder "
        "scores." in named
    )
    assert "scores none, so they leave nothing out" in kestrel_notes(None, "m", cfg, BoxesGrounder(tmp_path))[0]  # type: ignore[arg-type]


def test_two_supported_rounds_with_the_answer_unchanged_stop(lab) -> None:
    item = lab.run(
        "dog",
        lvlm_rules(
            "dog",
            "Yes",
            [
                {
                    "when_all": ["strict verifier", found("dog", 1)],
                    "answer": record("supported", 0.9, ["e_count_dog", "e_seg_dog"]),
                }
            ],
        ),
    )
    assert (item.answer, item.stopped, len(item.rounds)) == ("Yes", "stable", 2)
    ids = [e["id"] for e in item.trace["rounds"][0]["evidence"]]
    assert ids == ["e_seg_dog", "e_crop_dog", "e_count_dog"]  # the overlay and the crop are images in the store
    assert all(e.get("image") for e in item.trace["rounds"][0]["evidence"][:2])


def test_a_supported_flip_is_not_stable_after_two_rounds(lab) -> None:
    """No -> Yes through the gate in round 1; two supported rounds then, but the answer changed
    during them, so not "stable"; round 2 brought nothing stronger, so the loop stops there."""
    item = lab.run(
        "dog",
        lvlm_rules(
            "dog",
            "No",
            [{"when_all": ["strict verifier", found("dog", 1)], "answer": record("supported", 0.9, ["e_count_dog"])}],
        ),
    )
    assert (item.initial, item.answer, item.stopped, len(item.rounds), item.held) == (
        "No",
        "Yes",
        "no_stronger_evidence",
        2,
        ["No", "Yes", "Yes"],
    )


def test_rounds_go_on_while_the_evidence_grows_stronger(lab) -> None:
    """Issue 32 item 16, the stop rule (000 3.4): a round whose verifier is more confident than the
    round before is stronger evidence, so a third round runs; the same confidence again stops."""
    rising = lab.run(
        "horse",
        lvlm_rules(
            "horse",
            "Yes",
            [
                {
                    "when_all": ["strict verifier", "Previous verdict (round 2)"],
                    "answer": record("contradicted", 0.7, ["e_count_horse"]),
                },
                {
                    "when_all": ["strict verifier", "Previous verdict (round 1)"],
                    "answer": record("contradicted", 0.7, ["e_count_horse"]),
                },
                {"when_all": ["strict verifier"], "answer": record("contradicted", 0.6, ["e_count_horse"])},
            ],
        ),
    )
    assert (rising.stopped, len(rising.rounds)) == ("max_rounds", 3)
    flat = lab.run(
        "cow",
        lvlm_rules(
            "cow", "Yes", [{"when_all": ["strict verifier"], "answer": record("contradicted", 0.6, ["e_count_cow"])}]
        ),
    )
    assert (flat.stopped, len(flat.rounds)) == ("no_stronger_evidence", 2)


def test_count_compare_and_count_vision_evidence(lab) -> None:
    """Issue 32 item 16, the count evidence of 000 (Figure 8's ids): the grounder's count against the
    claim's number (e_countcmp), the model's own count (e_countvis) and it against the claim's number
    (e_countviscmp), all citable."""
    question = "Are there two dogs in the image?"
    count_claim = claim("dog", kind="count", text="There are two dogs in the image.")
    rules = [
        {
            "when_all": ["state one claim that can be checked", question],
            "answer": json.dumps({"answer": "Yes", "verifiable_claims": [count_claim]}),
        },
        {"when_all": ["Count the instances", "Object: dog"], "answer": "2"},
        {
            "when_all": [
                "strict verifier",
                "[e_countcmp_dog] The grounding agent found 1 'dog'; the claim says 2: fewer than claimed.",
            ],
            "answer": record("contradicted", 0.95, ["e_countcmp_dog"]),
        },
        {
            "when_all": ["cautious VQA assistant", question],
            "answer": json.dumps({"new_claims": [{**count_claim, "priority": 1}], "Answer": "No"}),
        },
    ]
    item = lab.run_item(KestrelItem("k-dogs", lab.image, question, "count", "dog"), rules)
    evidence = {e["id"]: e["text"] for e in item.trace["rounds"][0]["evidence"]}
    assert evidence["e_countcmp_dog"] == "The grounding agent found 1 'dog'; the claim says 2: fewer than claimed."
    assert evidence["e_countvis_dog"] == "The model counts 2 'dog' in the image."
    assert evidence["e_countviscmp_dog"] == "The model counts 2 'dog'; the claim says 2: as many as claimed."
    assert (item.answer, item.rounds[0].verdict, item.rounds[0].gated) == ("No", "contradicted", True)
    assert [claimed_count(t) for t in ("There are 3 cats.", "two dogs", "a dog")] == [3, 2, None]


@pytest.mark.parametrize(
    "reply",
    [
        record("contradicted", 0.6, ["e_count_horse"]),  # below existence's 0.82
        record("contradicted", 0.95, []),  # nothing cited
    ],
)
def test_no_flip_without_the_gate(lab, reply) -> None:
    """The model proposes No every round, but the verification is not decisive: the answer stays."""
    item = lab.run("horse", lvlm_rules("horse", "Yes", [{"when_all": ["strict verifier"], "answer": reply}]))
    assert (item.answer, item.stopped) == ("Yes", "no_stronger_evidence")
    assert [(r["verdict"], r["gated"], r["proposed"], r["changed"]) for r in item.trace["rounds"]] == [
        ("insufficient", False, "No", False)
    ] * 2


def test_an_unusable_record_stops_with_the_answer_kept(lab) -> None:
    item = lab.run(
        "cow",
        lvlm_rules(
            "cow", "Yes", [{"when_all": ["strict verifier"], "answer": record("contradicted", 0.95, ["e_seg_cow"])}]
        ),
    )  # not shown
    assert (item.answer, item.stopped, len(item.rounds)) == ("Yes", "error", 1)
    assert "cites unknown evidence id 'e_seg_cow'" in item.trace["rounds"][0]["error"]
    failed = lab.run("yak", [{"when_all": ["state one claim"], "answer": init("Maybe", "yak")}])
    assert failed.answer is None and failed.stopped == "error" and "not Yes or No" in failed.error
    row = kestrel_row(
        {
            "sample_id": "k-yak",
            "dataset": "coco",
            "split": "random",
            "image": lab.image,
            "question_id": 2,
            "object": "yak",
            "question": "Is there a yak in the image?",
            "label": "no",
        },
        failed,
    )
    assert row["grade"] == "FAILED" and row["answer"] is None


def test_yes_guard_turns_a_confident_no(lab) -> None:
    guard = {
        "when_all": ["Check whether the Yes/No question is true"],
        "answer": json.dumps({"answer": "no", "confidence": "high", "reason": "no cow"}),
    }
    verify = [{"when_all": ["strict verifier"], "answer": record("insufficient", 0.5, [])}]
    off = lab.run("cow", lvlm_rules("cow", "Yes", verify, [guard]))
    assert off.answer == "Yes" and "yes_guard" not in off.trace  # off by default, as in the main text
    on = lab.run("cow", lvlm_rules("cow", "Yes", verify, [guard]), KestrelConfig(yes_guard=True))
    assert on.initial == "Yes" and on.held[0] == "No" and on.trace["yes_guard"]["changed"]


def test_position_and_colour_evidence(lab) -> None:
    """Position from the union boxes (thirds) and the centres of two targets; colour from the
    crop, named by the model looking at the crop and the whole image."""
    position = claim("dog", "position", ["dog", "cat"], "The dog is left of the cat.")
    rules = [
        {
            "when_all": ["state one claim", "Is the dog left of the cat?"],
            "answer": json.dumps({"answer": "Yes", "verifiable_claims": [position]}),
        },
        {"when_all": ["strict verifier"], "answer": record("supported", 0.9, ["e_posrel_c1"])},
        {
            "when_all": ["cautious VQA"],
            "answer": json.dumps({"new_claims": [{**position, "priority": 1}], "Answer": "Yes"}),
        },
    ]
    item = lab.run_item(KestrelItem("k-pos", lab.image, "Is the dog left of the cat?", "position", "dog"), rules)
    evidence = {e["id"]: e["text"] for e in item.trace["rounds"][0]["evidence"]}
    assert evidence["e_pos_dog"] == "The 1 instance of 'dog' lies in the top left of the image."
    assert evidence["e_pos_cat"] == "The 1 instance of 'cat' lies in the bottom right of the image."
    assert evidence["e_posrel_c1"] == "'dog' is left of and above 'cat' (by the centres of their boxes)."
    assert item.answer == "Yes" and item.stopped == "stable"
    colour = claim("cat", "colour", ["cat"], "The cat is black.")
    done = lab.run_item(
        KestrelItem("k-col", lab.image, "Is the cat black?", "colour", "cat"),
        [
            {
                "when_all": ["state one claim", "Is the cat black?"],
                "answer": json.dumps({"answer": "Yes", "verifiable_claims": [colour]}),
            },
            {"when_all": ["Name the main colour", "Object: cat"], "answer": "olive green"},
            {
                "when_all": ["strict verifier", "crop as olive green"],
                "answer": record("contradicted", 0.9, ["e_color_cat"]),
            },
            {
                "when_all": ["cautious VQA", "verdict: contradicted"],
                "answer": json.dumps({"new_claims": [{**colour, "priority": 1}], "Answer": "No"}),
            },
        ],
    )
    evidence = {e["id"]: e for e in done.trace["rounds"][0]["evidence"]}
    assert evidence["e_color_cat"]["text"] == "The model sees the 'cat' crop as olive green."
    assert set(evidence) == {"e_seg_cat", "e_crop_cat", "e_color_cat"} and done.answer == "No"


def test_geometry_words() -> None:
    assert where((0, 0, 60, 40), 210, 120) == "the top left" and where((90, 45, 120, 75), 210, 120) == "the centre"
    assert where((0, 45, 30, 75), 210, 120) == "the left" and where((150, 80, 200, 120), 210, 120) == "the bottom right"
    assert relation((10, 10, 60, 50), (150, 60, 200, 110)) == "left of and above"
    assert relation((100, 0, 110, 20), (100, 80, 110, 100)) == "above"
    assert relation((0, 0, 10, 10), (0, 0, 10, 10)) == "centred on"


def test_replies_are_read_strictly() -> None:
    good = init("yes", "dog")
    assert parse_initial("existence")(good)[0] == "Yes"
    for bad, reason in [
        (init("Yes", "dog", kind="count"), "type 'count', but 'existence'"),
        (init("Yes", "dog", targets=["dog", "leash"]), "exactly one target"),
        (json.dumps({"answer": "Yes", "verifiable_claims": []}), "exactly one claim"),
        (json.dumps({"answer": "Yes", "verifiable_claims": [claim("dog")], "note": 1}), "exactly the keys"),
        ("Yes, there is a dog.", "not one JSON object"),
    ]:
        with pytest.raises(RecordError, match=reason):
            parse_initial("existence")(bad)
    assert parse_refined("existence")(refined("No", "dog"))[0] == "No"
    with pytest.raises(RecordError, match="give 1 to 4 new claims"):
        parse_refined("existence")(json.dumps({"new_claims": [], "Answer": "No"}))
    two = claim("dog", "position", ["dog", "cat"])
    assert parse_initial("position")(json.dumps({"answer": "No", "verifiable_claims": [two]}))[1][0].targets == (
        "dog",
        "cat",
    )


def test_a_blind_model_is_refused(world) -> None:
    from mmcurate.evaluation.failures import EvaluationError
    from mmcurate.evaluation.pope.probes import pope_answers

    world.add("blind", [], default="Yes")
    with pytest.raises(EvaluationError, match="model 'blind' cannot see them"):
        pope_answers([], world.ctx(), "blind", "plain")


def test_config_ranges() -> None:
    with pytest.raises(ValueError, match="saliency"):
        KestrelConfig(grounding="saliency")
    with pytest.raises(ValueError, match="cannot exceed max_rounds"):
        ClaimGate(max_rounds=1, stable_rounds=2)
    with pytest.raises(ValueError, match="zoom"):
        KestrelConfig(zoom=0.5)
    from mmcurate.core.config import Settings

    with pytest.raises(ValueError, match=r"unknown model \['ghost'\]"):
        Settings(evaluation={"pope": {"kestrel": {"verifier": "ghost"}}})
    with pytest.raises(ValueError, match=r"unknown model \['molmo'\]"):
        Settings(evaluation={"pope": {"kestrel": {"grounding": "pointing:molmo"}}})
    with pytest.raises(ValueError, match="pope.sources"):
        Settings(pope={"sources": []})
    with pytest.raises(MmcurateError, match="POPE runs plain or kestrel"):
        run_options({"system": "verify-first"})
    assert run_options({}) == {"system": "plain", "oracle_grounding": False}
    assert run_options({"system": "kestrel", "oracle_grounding": True}) == {
        "system": "kestrel",
        "oracle_grounding": True,
    }
    with pytest.raises(MmcurateError, match="only --system kestrel grounds"):
        run_options({"oracle_grounding": True})


@pytest.mark.parametrize(
    "reply, read",
    [
        ("Yes, there is a dog.", "yes"),
        ("No.", "no"),
        ("There is not a dog in the image.", "no"),
        ("Yes. No dog though", "yes"),  # only the first sentence counts
        ("I cannot tell", "yes"),  # POPE's rule: no no-word reads yes
        ("No, there isn't", "no"),
    ],
)
def test_popes_answer_reading(reply, read) -> None:
    assert read_answer(reply) == read


def test_popes_metrics_by_hand() -> None:
    def row(split, label, answer):
        return {"dataset": "coco", "split": split, "label": label, "answer": answer, "reply": answer}

    rows = [
        row("random", "yes", "yes"),
        row("random", "yes", "no"),
        row("random", "no", "yes"),
        row("random", "no", "no"),
        row("random", "no", "no"),
        row("popular", "yes", None),
        row("popular", "no", "no"),
    ]
    by = {m["split"]: m for m in metrics(rows)}
    r = by["random"]
    assert (r["tp"], r["fp"], r["tn"], r["fn"], r["n"]) == (1, 1, 2, 1, 5)
    assert (r["accuracy"], r["precision"], r["recall"], r["yes_ratio"]) == (0.6, 0.5, 0.5, 0.4)
    assert r["f1"] == pytest.approx(0.5)
    p = by["popular"]
    assert (p["n"], p["failed"], p["precision"], p["recall"], p["f1"]) == (1, 1, None, None, None)
    assert by["all"]["n"] == 6 and by["all"]["failed"] == 1


def test_popes_metrics_per_dataset_and_split() -> None:
    # POPE reports each dataset's splits apart (Kestrel's Table 1): never pooled over datasets
    def row(dataset, split, label, answer):
        return {"dataset": dataset, "split": split, "label": label, "answer": answer, "reply": answer}

    rows = [
        row("coco", "random", "yes", "yes"),
        row("coco", "random", "no", "no"),
        row("gqa", "random", "yes", "no"),
        row("gqa", "random", "no", "no"),
        row("aokvqa", "adversarial", "no", "yes"),
        row("aokvqa", "adversarial", "yes", "yes"),
    ]
    table = metrics(rows)
    assert [(m["dataset"], m["split"]) for m in table] == [
        ("aokvqa", "adversarial"),
        ("coco", "random"),
        ("gqa", "random"),
        ("all", "all"),
    ]
    by = {(m["dataset"], m["split"]): m["accuracy"] for m in table}
    assert by == {
        ("aokvqa", "adversarial"): 0.5,
        ("coco", "random"): 1.0,
        ("gqa", "random"): 0.5,
        ("all", "all"): pytest.approx(4 / 6),
    }


def test_the_all_row_pools_popes_probes_only() -> None:
    """Issue 43 item 7: MME's probes (read by MME's rule, scored by MME's score) stay out of the
    ``all`` row; a release of MME probes alone has no ``all`` row."""

    def row(dataset, split, label, answer):
        return {"dataset": dataset, "split": split, "label": label, "answer": answer, "reply": answer}

    pope = [row("coco", "random", "yes", "yes"), row("coco", "random", "no", "no")]
    mme = [row("mme", "existence", "yes", "no"), row("mme", "existence", "no", "other")]
    table = metrics(pope + mme)
    pooled = table[-1]
    assert (pooled["dataset"], pooled["n"], pooled["accuracy"]) == ("all", 2, 1.0)
    assert [(m["dataset"], m["split"]) for m in metrics(mme)] == [("mme", "existence")]


def test_the_note_counts_the_replies_popes_rule_read_as_yes_by_default(tmp_path) -> None:
    """Issue 43 item 7: the note counts the replies POPE's case-sensitive rule read as "yes" for want
    of any of its words: a leading "NO", "No" glued to a line break, "Not really." count; a "yes",
    a "no" and MME's replies do not."""

    def row(dataset, split, reply, label="yes"):
        return {
            "sample_id": reply,
            "dataset": dataset,
            "split": split,
            "question_id": 1,
            "object": "dog",
            "image_file": "a.jpg",
            "question": "Is there a dog?",
            "label": label,
            "system": "plain",
            "reply": reply,
            "answer": read_answer(reply),
            "grade": "CORRECT",
        }

    by_default = ["NO, there is none.", "No\nThere isn't one.", "Not really.", "I cannot tell"]
    read = ["Yes, there is.", "No.", "There is not a dog.", "yes"]
    assert [read_answer(r) for r in by_default] == ["yes"] * 4
    rows = [row("coco", "random", r) for r in by_default + read] + [row("mme", "existence", "Maybe.")]
    table = write_pope_evaluation(rows, tmp_path, "t", [])
    assert metrics(rows)[-1]["unread"] == 4
    assert "4 replies held none of POPE's words" in table and "read them as 'yes'" in table
    assert "The 'all' row pools POPE's probes only" in table


def test_the_scripted_detector_reports_its_rules_and_states_its_errors(tmp_path) -> None:
    """Issue 32 item 15: the demo's grounding agent is a scripted detector that reads no label file;
    its detections come from its own rules, a miss finds nothing, and it says what it is."""
    from mmcurate.annotation.grounders import Query, make_grounder

    rules = tmp_path / "rules.jsonl"
    rules.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"sha256": "a", "label": "dog", "box": [0, 0, 10, 10], "stated": "hit"},
                {"sha256": "a", "label": "cat", "box": [5, 5, 20, 20], "stated": "false alarm"},
                {"sha256": "a", "label": "tripod", "stated": "miss"},
            ]
        )
        + "\n"
    )
    detector = make_grounder(f"detector:{rules}")
    found = detector.locate([Query("q1", "a", "dog"), Query("q2", "a", "cat"), Query("q3", "a", "tripod")], None)
    assert [len(g.instances) for g in found] == [1, 1, 0]
    assert "stated false alarms: cat; stated misses: tripod" in detector.describe()
    rules.write_text(json.dumps({"sha256": "a", "label": "dog", "stated": "hit"}) + "\n")  # a hit without a box
    with pytest.raises(MmcurateError, match="rules.jsonl:1: a detection needs"):
        make_grounder(f"detector:{rules}")
