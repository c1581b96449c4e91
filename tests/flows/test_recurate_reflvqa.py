"""RefLVQA re-curation on scripted models (issue 27.2): a new inspector re-runs the image-
necessity filter and a new entailment judge decides the citations again; the original
inspector is never asked (its graded answers come from the ledger), only new calls are made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path]:
    from mmcurate.flows.reflvqa.curate import reflvqa

    return flowkit.recurate_base(
        tmp_path_factory,
        "recurate-reflvqa",
        reflvqa,
        lambda home, models: flowkit.reflvqa_config(home, fixtures_root, models),
        {
            name: {"backend": "scripted", "script": f"{name}.jsonl", "default": default, "revision": f"{name}-1"}
            for name, default in (("inspector", "I am not sure."), ("sage", "I am not sure."), ("skeptic", "no"))
        },
    )


def test_new_inspector_and_judge_are_the_only_calls(built, asked):
    from mmcurate.flows.recurate import recurate_release

    home, config, release = built
    parent = open_release(release)
    qa = parent.table("qa").to_pylist()
    known = qa[0]  # the sage answers this question with the Reddit answer itself: no image needed
    (home / "sage.jsonl").write_text(json.dumps({"when_all": [known["question"]], "answer": known["answer"]}) + "\n")
    new = Path(
        recurate_release(release=str(release), add_model=["sage", "text_entailment=skeptic"], config=str(config))
    )
    assert new == release.parent / "1.1.0" and verify_release(new).ok
    assert set(asked) == {"sage", "skeptic"} and asked["sage"] == len(qa)  # the inspector was not asked
    recurated = open_release(new)
    removed = recurated.manifest.removed
    assert [r["sample_id"] for r in removed] == [known["sample_id"]]
    assert "answerable without the image" in removed[0]["reason"]
    # the skeptic rejects every document: no text citation is left, fact-checkable sentences are flagged
    sentences = [s for row in recurated.table("qa").to_pylist() for s in row["sentences"]]
    assert sentences and not any(s["text_citations"] for s in sentences)
    assert all(s["flagged"] for s in sentences if s["fact_checkable"] and not s["image_citations"])
    changelog = (new / "CHANGELOG.md").read_text()
    assert f"`{known['sample_id']}` (reddit)" in changelog and "[model `sage`]" in changelog
    cited_before = [r["sample_id"] for r in qa[1:] if any(s["text_citations"] for s in r["sentences"])]
    assert cited_before and all(
        f"`{sid}` (reddit): citation/citation.recheck: changed" in changelog for sid in cited_before
    )
    assert recurated.manifest.parent.version == "1.0.0" and recurated.manifest.judge_name == "llm:skeptic"


def test_the_plan_counts_the_new_models_calls(built):
    from mmcurate.planning.recuration import reflvqa_recuration
    from mmcurate.releases.recuration import begin_recuration

    home, config, release = built
    run = begin_recuration(release, config, ["sage", "text_entailment=skeptic"], version="1.2.0")
    plan = reflvqa_recuration(run)
    rows = {(r.step, r.model): r.requests for r in plan.rows}
    assert rows[("necessity", "sage")] == len(open_release(release).sample_ids)
    assert rows[("citation", "skeptic")] > 0 and "inspector" not in {r.model for r in plan.rows}
