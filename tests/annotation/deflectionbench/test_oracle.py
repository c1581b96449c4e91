"""Stage III: gold check, distractor pruning with early stop, k_min; on scripted answers."""

from __future__ import annotations

import pytest

from mmcurate.annotation.deflectionbench.oracle import OracleCheck
from mmcurate.core.errors import ConfigError
from mmcurate.core.schema import SAMPLE


def final(result):
    return {d.sample_id: d for d in result.decisions if d.check == "oracle.verdict"}


def keys(world, model, stage):
    return [k for s, k in world.sent[model] if s == stage]


def test_none_correct_discards_when_no_model_is_correct_and_stops_at_first_correct(world, make):
    good = make.sample("good", "Q-GOOD?", ["Paris"], negatives=[make.text("n1", "noise one")])
    bad = make.sample("bad", "Q-BAD?", ["Rome"], negatives=[make.text("n2", "noise two")])
    idk = make.sample("idk", "Q-IDK?", ["Oslo"])
    # m1 answers from the gold passage of "good" only; everyone else wrong or refusing
    m1 = world.add(
        "m1",
        [{"when_all": ["GOLD-good", "Q-GOOD"], "answer": "Paris"}, {"when_all": ["Q-IDK"], "answer": "I don't know"}],
    )
    m2 = world.add("m2", [{"when_all": ["Q-IDK"], "answer": "I don't know"}])
    result = OracleCheck([m1, m2], k_min=1, rule="none_correct").run(make.table([good, bad, idk]), world.ctx())
    v = final(result)
    assert v[good["sample_id"]].verdict == "keep"
    assert v[bad["sample_id"]].verdict == "drop" and v[bad["sample_id"]].detail["step"] == "gold"
    assert v[idk["sample_id"]].verdict == "drop"  # under none_correct, NOT_ATTEMPTED with gold is not enough
    # early elimination: m2 never asked the gold question of "good"
    assert good["sample_id"] not in keys(world, "m2", "oracle.gold")
    assert sorted(keys(world, "m2", "oracle.gold")) == sorted([bad["sample_id"], idk["sample_id"]])
    # dropped samples never reach the distractor check
    assert keys(world, "m1", "oracle.distractor") == [f"{good['sample_id']}/n1"]
    assert result.kept.column("sample_id").to_pylist() == [good["sample_id"]]
    assert result.kept.schema == SAMPLE
    # naive: both models on the three gold sets, then on the one distractor of the one sample
    # that passed (the naive algorithm never checks distractors of discarded samples)
    assert result.naive_calls == 2 * (3 + 1)
    ledger = result.ledger()
    assert ledger.num_rows == len(result.decisions) and set(ledger.column("stage").to_pylist()) == {"oracle"}
    assert set(ledger.column("run_id").to_pylist()) == {"r"}


def test_all_incorrect_is_the_default_and_keeps_what_one_model_declines(world, make):
    """eq. 4: discard only when every model is INCORRECT with gold; the first model that is
    not INCORRECT settles the sample, so later models are not asked its gold question."""
    wrong = make.sample("wrong", "Q-WRONG?", ["Rome"], negatives=[make.text("n1", "noise one")])
    declined = make.sample("declined", "Q-DECL?", ["Oslo"], negatives=[make.text("n2", "noise two")])
    late = make.sample("late", "Q-LATE?", ["Lima"], negatives=[make.text("n3", "noise three")])
    m1 = world.add("m1", [{"when_all": ["Q-DECL", "GOLD-declined"], "answer": "I don't know"}])
    m2 = world.add("m2", [{"when_all": ["Q-LATE", "GOLD-late"], "answer": "I don't know"}])
    check = OracleCheck([m1, m2], k_min=1)
    assert check.rule == "all_incorrect"
    result = check.run(make.table([wrong, declined, late]), world.ctx())
    v = final(result)
    assert v[wrong["sample_id"]].verdict == "drop" and v[wrong["sample_id"]].detail["rule"] == "all_incorrect"
    assert "every model answered INCORRECT" in v[wrong["sample_id"]].detail["reason"]
    assert v[declined["sample_id"]].verdict == "keep"
    assert (v[declined["sample_id"]].detail["gold_settled_by"], v[declined["sample_id"]].detail["gold_grade"]) == (
        "m1",
        "NOT_ATTEMPTED",
    )
    assert v[late["sample_id"]].verdict == "keep" and v[late["sample_id"]].detail["gold_settled_by"] == "m2"
    # m1's NOT_ATTEMPTED settled "declined": m2 was asked only the other two gold questions
    assert sorted(keys(world, "m2", "oracle.gold")) == sorted([wrong["sample_id"], late["sample_id"]])
    assert result.kept.column("sample_id").to_pylist() == [declined["sample_id"], late["sample_id"]]
    assert result.naive_calls == 2 * (3 + 2)


def test_the_two_rules_differ_exactly_on_samples_without_a_correct_answer_and_with_a_decline(world, make):
    rows = [
        make.sample(name, f"Q-{name.upper()}?", ["Paris"], negatives=[make.text(f"{name}-n", "noise")])
        for name in ("correct", "declined", "wrong")
    ]
    m1 = world.add(
        "m1",
        [{"when_all": ["GOLD-correct"], "answer": "Paris"}, {"when_all": ["GOLD-declined"], "answer": "I don't know"}],
    )
    by_rule = {
        rule: final(OracleCheck([m1], k_min=1, rule=rule).run(make.table(rows), world.ctx()))
        for rule in ("all_incorrect", "none_correct")
    }
    changed = {sid for sid, d in by_rule["all_incorrect"].items() if d.verdict != by_rule["none_correct"][sid].verdict}
    assert changed == {rows[1]["sample_id"]}


def test_unknown_oracle_rule_is_a_config_error(world, make):
    m1 = world.add("m1", [])
    with pytest.raises(ConfigError, match="unknown oracle rule 'most_correct'"):
        OracleCheck([m1], k_min=1, rule="most_correct").run(make.table([make.sample("s", "Q?", ["A"])]), world.ctx())


def test_leaking_distractor_is_removed_and_not_asked_to_later_models(world, make):
    s = make.sample(
        "s",
        "Q-S?",
        ["Paris"],
        negatives=[
            make.text("leak", "LEAK1 the city is Paris"),
            make.text("late", "LEAK2 hint"),
            make.text("ok1", "harmless one"),
            make.text("ok2", "harmless two"),
        ],
    )
    m1 = world.add("m1", [{"when_all": ["GOLD-s"], "answer": "Paris"}, {"when_all": ["LEAK1"], "answer": "Paris"}])
    m2 = world.add("m2", [{"when_all": ["LEAK2"], "answer": "Paris"}])
    result = OracleCheck([m1, m2], k_min=2).run(make.table([s]), world.ctx())
    sid = s["sample_id"]
    assert keys(world, "m2", "oracle.distractor") == [f"{sid}/late", f"{sid}/ok1", f"{sid}/ok2"]
    assert [c["context_id"] for c in result.kept.column("negative_contexts")[0].as_py()] == ["ok1", "ok2"]
    summary = {d.context_id: d for d in result.decisions if d.check == "oracle.distractor" and d.model is None}
    assert {c: d.verdict for c, d in summary.items()} == {
        "leak": "remove",
        "late": "remove",
        "ok1": "keep",
        "ok2": "keep",
    }
    assert summary["leak"].detail["deciding_model"] == "m1" and summary["late"].detail["deciding_model"] == "m2"
    per_model = [
        (d.model, d.context_id, d.verdict) for d in result.decisions if d.check == "oracle.distractor" and d.model
    ]
    assert ("m1", "leak", "CORRECT") in per_model and ("m2", "leak", "CORRECT") not in per_model
    k = [d for d in result.decisions if d.check == "oracle.k_min"][0]
    assert k.verdict == "pass" and k.detail["removed"] == ["leak", "late"]
    assert result.requests == 1 + 4 + 3


def test_k_min_discards_samples_with_too_few_negatives(world, make):
    s = make.sample("s", "Q-S?", ["Paris"], negatives=[make.text("leak", "LEAK1"), make.text("ok", "harmless")])
    m1 = world.add("m1", [{"when_all": ["GOLD-s"], "answer": "Paris"}, {"when_all": ["LEAK1"], "answer": "Paris"}])
    kept = OracleCheck([m1], k_min=1).run(make.table([s]), world.ctx())
    dropped = OracleCheck([m1], k_min=2).run(make.table([s]), world.ctx())
    assert kept.kept.num_rows == 1 and dropped.kept.num_rows == 0
    v = final(dropped)[s["sample_id"]]
    assert v.verdict == "drop" and v.detail["step"] == "k_min" and v.detail["negatives"] == 1
    # the drop names the model whose answers removed the distractors (issue 42 item 21)
    assert v.detail["deciding_model"] == "m1"
    assert v.detail["reason"] == "1 clean negatives < k_min 2: m1 answered correctly from 1 distractor alone, removed"
    short = OracleCheck([m1], k_min=3).run(
        make.table([make.sample("s", "Q-S?", ["Paris"], negatives=[make.text("ok", "harmless")])]), world.ctx()
    )
    v = final(short)[s["sample_id"]]
    assert "deciding_model" not in v.detail and v.detail["reason"] == "1 clean negatives < k_min 3 (the sample had 1)"


def test_failures_are_conservative(world, make):
    gold_fail = make.sample("gf", "Q-GF?", ["Paris"], negatives=[make.text("x", "CLEAN-CTX")])
    dist_fail = make.sample("df", "Q-DF?", ["Paris"], negatives=[make.text("y", "FAILME"), make.text("z", "CLEAN-CTX")])
    # no default: anything not matched fails (the gold of "gf" is never answered)
    m1 = world.add(
        "m1",
        [{"when_all": ["GOLD-df"], "answer": "Paris"}, {"when_all": ["CLEAN-CTX"], "answer": "Berlin"}],
        default=None,
    )
    result = OracleCheck([m1], k_min=2).run(make.table([gold_fail, dist_fail]), world.ctx())
    v = final(result)
    assert v[gold_fail["sample_id"]].verdict == "error" and v[gold_fail["sample_id"]].detail["step"] == "gold"
    # the unchecked distractor is not certified clean: removed, and k_min then fails as "error"
    assert v[dist_fail["sample_id"]].verdict == "error" and v[dist_fail["sample_id"]].detail["step"] == "k_min"
    assert result.kept.num_rows == 0
    errs = [d for d in result.decisions if d.check == "oracle.distractor" and d.model is None and d.verdict == "error"]
    assert [d.context_id for d in errs] == ["y"]


def test_the_evidence_prompt_forces_no_guess_unless_configured(world, make):
    """Stage III asks for the answer from the evidence and nothing more (the paper): a model that
    declines with the gold is NOT_ATTEMPTED and keeps the sample under eq. 4; asked for a best
    guess, its wrong guess is INCORRECT and the sample goes."""
    s = make.sample("s", "Q-S?", ["Paris"], negatives=[make.text("n", "noise")])
    m1 = world.add("m1", [{"when_all": ["best guess"], "answer": "Rome"}], default="I don't know")
    paper = OracleCheck([m1], k_min=1).run(make.table([s]), world.ctx())
    assert (
        final(paper)[s["sample_id"]].verdict == "keep" and paper.components["stage_iii_prompt"] == "oracle.evidence.v2"
    )
    guessed = OracleCheck([m1], k_min=1, force_guess=True).run(make.table([s]), world.ctx())
    assert (
        final(guessed)[s["sample_id"]].verdict == "drop"
        and guessed.components["stage_iii_prompt"] == "oracle.evidence.v1"
    )
