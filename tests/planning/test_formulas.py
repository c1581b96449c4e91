"""Every formula of the plan, pinned on a hand-computed example."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.judging.simpleqa import JUDGE_MAX_TOKENS
from mmcurate.models.requests import ChatRequest
from mmcurate.planning import throughput
from mmcurate.planning.deflectionbench.curation import plan_deflectionbench
from mmcurate.planning.inputs import PlanInput
from mmcurate.planning.plan import elimination, remaining
from mmcurate.planning.rates import (
    DeflectionRates,
    RefLVQARates,
    equal_share,
    halving_drops,
    keep_share,
    paper_deflection,
    paper_reflvqa,
)
from mmcurate.planning.reflvqa.curation import plan_reflvqa, reach
from mmcurate.planning.tokens import completion_budget, prompt_tokens

SHA = "ab" * 32


def spec(name: str = "m", **fields) -> ModelSpec:
    return ModelSpec(name=name, backend=fields.pop("backend", "scripted"), script=Path("rules.jsonl"), **fields)


def test_prompt_tokens_follow_the_documented_rule():
    request = ChatRequest(
        "k",
        [
            {"role": "system", "content": "x" * 8},  # 8 chars -> 2 tokens
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "y" * 5},  # 5 chars -> 2 tokens (ceil)
                    {"type": "image", "sha256": SHA},
                ],
            },
        ],
        "t",
    )
    # 3 for the reply + (3 + 2) + (3 + 2 + image)
    assert prompt_tokens(request, spec(vision=True, image_tokens=100)) == 3 + 5 + 5 + 100
    assert prompt_tokens(request, spec(vision=False, image_tokens=100)) == 3 + 5 + 5  # the client drops images
    assert completion_budget(request, spec(max_tokens=64)) == 64
    assert completion_budget(ChatRequest("k", [], "t", max_tokens=8), spec(max_tokens=64)) == 8


def test_throughput_defaults_by_size_and_backend():
    assert throughput.parameters_b(spec(model="Qwen/Qwen2.5-VL-32B-Instruct")) == 32
    assert throughput.parameters_b(spec(model="google/gemma-3-27b-it")) == 27
    assert throughput.parameters_b(spec(name="gpt-4o", model="gpt-4o-2024-08-06")) is None
    assert throughput.by_size(7) == throughput.by_size(8) == 3400.4  # below the first anchor: the 8B figure
    assert throughput.by_size(70) == pytest.approx(863.8)
    assert throughput.by_size(246) == pytest.approx(325.3 / 2)  # above 123B: 1/size
    # 32B sits on the log-log line from (12B, 2414.8) to (70B, 863.8)
    slope = math.log(863.8 / 2414.8) / math.log(70 / 12)
    assert throughput.by_size(32) == pytest.approx(2414.8 * (32 / 12) ** slope)
    served = spec(backend="openai", base_url="http://gpu:8000/v1", model="org/model-70B")
    assert throughput.hours(3600 * 863.8, served) == pytest.approx(1.0)
    assert throughput.hours(10, spec()) is None  # scripted: no compute
    assert throughput.hours(10, spec(backend="openai", model="gpt-4o")) is None  # hosted: billed per token
    assert throughput.hours(3600 * 150, spec(backend="embedded")) == pytest.approx(1.0)
    assert throughput.hours(3600 * 500, spec(tokens_per_second=500)) == pytest.approx(1.0)  # the config wins
    priced = spec(price_input_per_mtok=2.5, price_output_per_mtok=10)
    assert throughput.cost(2_000_000, 1_000_000, priced) == pytest.approx(15.0)
    assert throughput.cost(2_000_000, 1_000_000, spec()) == 0.0


def test_early_elimination():
    # each model settles its share of what it is asked; a pool longer than the rates repeats the last one
    assert elimination(100, (0.5, 0.2), 3) == pytest.approx([100, 50, 40])
    assert remaining(100, (0.5, 0.2), 3) == pytest.approx(32)
    assert elimination(100, (), 2) == [100, 100]


def test_paper_split_helpers():
    # four models, halving: the first drops 8/15 of the dropped samples, the last 1/15
    drops = halving_drops(0.25, 2)  # 0.75 dropped: 0.5 by the first, 0.25 by the second
    assert drops == pytest.approx((0.5, 0.5))
    assert equal_share(0.75, 2) == pytest.approx(0.5)  # 1 - (1 - 0.5)^2
    assert keep_share((0.5,), 2, 0) == pytest.approx(0.25)
    assert keep_share((0.5,), 2, 1) == pytest.approx(0.75)
    rates = paper_deflection(models=4, offered_negatives=20)
    stage1 = math.prod(1 - d for d in rates.stage1_drop)
    gold = 1 - (1 - rates.gold_settle[0]) ** 4
    survive = (1 - rates.leak[0]) ** 4
    assert stage1 * gold * rates.kmin_pass == pytest.approx(2775 / 45900)  # the paper's end-to-end retention
    assert gold == pytest.approx(0.9) and survive * 20 == pytest.approx(11.8)  # Table 3: 11.8 negatives kept
    reflvqa = paper_reflvqa(inspectors=4, max_right=1)
    kept = reflvqa.relevance * keep_share(reflvqa.inspector_right, 4, 1)
    assert kept == pytest.approx(81_173 / 432_817)


def test_reach_of_inspectors():
    asked, kept = reach((0.5,), 2, 0)  # eliminated at the first right answer
    assert asked == pytest.approx([1.0, 0.5]) and kept == pytest.approx(0.25)
    asked, kept = reach((0.5,), 2, 1)
    assert asked == pytest.approx([1.0, 1.0]) and kept == pytest.approx(0.75)


def _row(make) -> dict:
    return make.sample(
        "s1", "Which colour is the door?", ["red"], images=[SHA], negatives=[make.text("n1", "A blue door.")]
    )


def test_deflectionbench_plan_on_a_hand_example(tmp_path, make):
    settings = Settings(
        workdir=tmp_path,
        models={
            "big": {
                "name": "big",
                "backend": "openai",
                "base_url": "http://gpu:8000/v1",
                "model": "org/m-70B",
                "vision": True,
                "max_tokens": 64,
                "price_input_per_mtok": 0,
                "price_output_per_mtok": 0,
            },
            "small": {
                "name": "small",
                "backend": "vllm",
                "model": "org/s",
                "tokens_per_second": 1000,
                "max_tokens": 32,
            },
            "judge": {
                "name": "judge",
                "backend": "openai",
                "model": "gpt-4o",
                "price_input_per_mtok": 2.5,
                "price_output_per_mtok": 10,
            },
        },
        judge={"kind": "llm", "model": "judge"},
        deflectionbench={"sources": [{"name": "webqa", "root": str(tmp_path)}], "gating": {"pool": ["big", "small"]}},
    )
    rates = DeflectionRates(
        source="hand",
        eligible=1.0,
        stage1_drop=(0.5, 0.2),
        pairing=0.5,
        gold_eligible=1.0,
        gold_settle=(0.5, 0.5),
        negatives=4.0,
        leak=(0.25, 0.0),
        kmin_pass=0.5,
        prejudge={"parametric": 0.5},
    )
    plan = plan_deflectionbench(settings, PlanInput(1000, [_row(make)], "given"), rates, "none_correct")
    requests = {(r.step, r.model): r.requests for r in plan.rows}
    assert requests == pytest.approx(
        {
            ("parametric", "big"): 1000,
            ("parametric", "small"): 500,  # Stage I: the first drops half
            ("oracle.gold", "big"): 200,
            ("oracle.gold", "small"): 100,  # 400 survive, pairing keeps 200
            ("oracle.distractor", "big"): 600,
            ("oracle.distractor", "small"): 450,  # 150 pass x 4 negatives
            ("parametric", "judge"): 750,  # (1000 + 500) answers, half settled by the pre-judge
            ("oracle.gold", "judge"): 300,
            ("oracle.distractor", "judge"): 1050,
        }
    )
    assert [round(n) for _, n in plan.funnel] == [1000, 400, 200, 75]
    from mmcurate.annotation.deflectionbench.oracle import distractor_request
    from mmcurate.gating.parametric import parametric_request

    big, small, judge = (settings.model(n) for n in ("big", "small", "judge"))
    row = _row(make)
    first = next(r for r in plan.rows if (r.step, r.model) == ("parametric", "big"))
    assert first.prompt_tokens == 1000 * prompt_tokens(parametric_request(row), big)
    assert first.completion_tokens == 1000 * 64
    assert first.hours == pytest.approx(1000 * (prompt_tokens(parametric_request(row), big) + 64) / 863.8 / 3600)
    leak = next(r for r in plan.rows if (r.step, r.model) == ("oracle.distractor", "small"))
    negative = row["negative_contexts"][0]
    assert leak.prompt_tokens == 450 * prompt_tokens(distractor_request(row, negative), small)
    assert leak.hours == pytest.approx((leak.prompt_tokens + leak.completion_tokens) / 1000 / 3600)
    judged = next(r for r in plan.rows if (r.step, r.model) == ("parametric", "judge"))
    assert judged.completion_tokens == 750 * JUDGE_MAX_TOKENS and judged.hours is None
    assert judged.cost == pytest.approx((judged.prompt_tokens * 2.5 + judged.completion_tokens * 10) / 1e6)
    total = plan.total()
    assert total.requests == pytest.approx(sum(requests.values()))
    assert total.cost == pytest.approx(sum(r.cost for r in plan.rows))


def test_reflvqa_plan_on_a_hand_example(tmp_path, make):
    models = {
        n: {"name": n, "backend": "vllm", "model": f"org/{n}-8B", "max_tokens": 16}
        for n in ("i1", "i2", "ev", "fc", "te")
    }
    settings = Settings(
        workdir=tmp_path,
        models=models,
        reflvqa={
            "source": {"name": "reddit", "root": str(tmp_path)},
            "inspectors": ["i1", "i2"],
            "evaluator": "ev",
            "max_right_inspectors": 0,
            "factcheck_model": "fc",
            "text_entailment": "llm:te",
            "top_text": 2,
        },
    )
    rates = RefLVQARates(source="hand", relevance=0.5, inspector_right=(0.5,), factcheckable=0.5, sentences=4.0)
    row = make.sample("p1", "What is this?", ["It is a lamp. It was made in 1950. It glows."])
    plan = plan_reflvqa(settings, PlanInput(100, [row], "given"), rates)
    requests = {r.model: r.requests for r in plan.rows}
    # relevance is skipped without a cross-modal encoder; the first right answer eliminates a pair
    assert requests == pytest.approx({"i1": 100, "i2": 50, "ev": 150, "fc": 100, "te": 100})
    assert [round(n) for _, n in plan.funnel] == [100, 100, 25, 50]


def test_an_unset_price_of_a_billed_model_is_an_unknown_cost_never_zero():
    """Issue 31 item 6: 245,000 GPT-4o requests were priced at 0.00."""
    from mmcurate.core.errors import MmcurateError
    from mmcurate.planning.plan import Plan, plan_row
    from mmcurate.planning.recuration import Budget

    hosted = spec("gpt-4o", backend="openai", model="gpt-4o")
    assert throughput.cost(1_000_000, 1_000_000, hosted) is None
    assert (
        throughput.cost(1_000_000, 1_000_000, spec("half", backend="openai", model="gpt-4o", price_input_per_mtok=2.5))
        is None
    )
    assert throughput.cost(1_000_000, 0, spec("local", backend="embedded")) == 0.0  # GPU-hours, not money
    served = spec("served", backend="openai", model="org/m-7B", base_url="http://gpu:8000/v1")
    assert throughput.cost(1_000_000, 0, served) is None  # ours or a hosted API's: the URL cannot say
    free = served.model_copy(update={"price_input_per_mtok": 0.0, "price_output_per_mtok": 0.0})
    assert throughput.cost(1_000_000, 0, free) == 0.0  # a server of one's own says so
    for here in ("http://127.0.0.1:8080/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"):
        assert throughput.cost(1_000_000, 0, served.model_copy(update={"base_url": here})) == 0.0
    request = ChatRequest("k", [{"role": "user", "content": "x" * 40}], "t")
    rows = [plan_row("I", "parametric", hosted, 245_000, [request]), plan_row("I", "parametric", spec(), 10, [request])]
    plan = Plan("deflectionbench", 10, "--samples", "paper", [], rows)
    assert plan.total().cost is None and plan.unpriced() == ["gpt-4o"]
    text = plan.render()
    assert [line.split()[-1] for line in text.splitlines() if line.startswith(("I ", "total"))] == [
        "unknown",
        "0.00",
        "unknown",
    ]
    assert "price not set: cost unknown for gpt-4o" in text
    assert plan.table()[0]["cost"] is None
    with pytest.raises(MmcurateError) as refused:
        Budget(max_cost=20).refuse_over(plan)
    assert "price not set: cost unknown for gpt-4o" in str(refused.value) and "--max-cost $20.00" in str(refused.value)
    Budget(max_calls=300_000).refuse_over(plan)  # a call budget alone still checks


def test_an_unpriced_model_at_a_hosted_base_url_is_unknown_and_refused_by_max_cost():
    """Issue 42 item 13: an ``openai`` model at a hosted ``base_url`` without prices planned
    "cost $ 0.00", and ``watch --run --max-cost 1`` made 20 calls."""
    from mmcurate.core.errors import MmcurateError
    from mmcurate.planning.plan import Plan, plan_row
    from mmcurate.planning.recuration import Budget

    hosted = spec(
        "together-vlm", backend="openai", model="Qwen/Qwen2.5-VL-72B-Instruct", base_url="https://api.together.xyz/v1"
    )
    request = ChatRequest("k", [{"role": "user", "content": "x" * 40}], "t")
    plan = Plan("deflectionbench", 20, "--samples", "paper", [], [plan_row("I", "parametric", hosted, 20, [request])])
    assert plan.total().cost is None and plan.unpriced() == ["together-vlm"]
    text = plan.render()
    assert [line.split()[-1] for line in text.splitlines() if line.startswith(("I ", "total"))] == ["unknown"] * 2
    assert "price not set: cost unknown for together-vlm" in text
    with pytest.raises(MmcurateError, match=r"cost unknown for together-vlm, so --max-cost \$1.00 cannot be checked"):
        Budget(max_cost=1).refuse_over(plan)
