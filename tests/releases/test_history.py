"""A benchmark's history (issue 45 item 3, 4): versions, what each re-curation removed and whose
answers removed it, the saturation curve and a leaderboard with Wilson intervals; the page
rendered in headless Chromium."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmcurate.core.ledger import Decision, ledger_table
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.history import HISTORY_HTML, HISTORY_MD, benchmark_history, write_history
from mmcurate.releases.writer import write_release
from tests import static_page
from tests.releases import release_builders as b
from tests.releases.cli_helpers import run_cli


def _gate(sid: str, model: str, grade: str) -> Decision:
    return Decision(sid, "parametric", "gate.answer", grade, model=model, detail={"answer": "x"})


def _verdict(sid: str, keep: bool, model: str) -> Decision:
    return Decision(
        sid,
        "parametric",
        "gate.verdict",
        "keep" if keep else "drop",
        detail={
            "deciding_model": model,
            "reason": "no model answered from parametric knowledge"
            if keep
            else f"{model} answered from parametric knowledge",
        },
    )


def _draft(rows: list[dict], version: str, decisions: list[Decision], parent: str | None = None):
    draft = b.deflection_draft(rows, version=version, parent=parent)
    return replace(
        draft,
        ledger=ledger_table(decisions, run_id=f"run-{version}"),
        counts={**draft.counts, "run_id": f"run-{version}"},
    )


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory, store_and_shas) -> Path:
    """deflectionbench 1.0.0 (6 samples; smollm2 answered 2 of 10 candidates, dropped) and 1.1.0,
    its re-curation with gemma, which answers 2 of the 6 (removed)."""
    store, shas = store_and_shas
    root = tmp_path_factory.mktemp("history") / "releases"
    rows = b.deflection_rows(shas)
    ids = [r["sample_id"] for r in rows]
    candidates = ids + [f"dropped-{i}" for i in range(4)]
    first = [_gate(s, "smollm2", "CORRECT" if s in ("dropped-0", "dropped-1") else "INCORRECT") for s in candidates]
    first += [_verdict(s, s in ids, "smollm2") for s in candidates if s in ids or s in ("dropped-0", "dropped-1")]
    write_release(_draft(rows, "1.0.0", first), root, store)
    second = [_gate(s, "gemma", "CORRECT" if s in ids[4:] else "INCORRECT") for s in ids]
    second += [_verdict(s, s not in ids[4:], "gemma") for s in ids]
    inherited = ledger_table(first, run_id="run-1.0.0")  # a re-curation's ledger carries its parent's
    draft = replace(
        _draft(rows[:4], "1.1.0", [], parent="1.0.0"),
        ledger=pa.concat_tables([inherited, ledger_table(second, run_id="run-1.1.0")]),
    )
    draft.models.append({"role": "gating", "name": "gemma", "backend": "scripted", "model": "gemma", "revision": "g1"})
    write_release(draft, root, store)
    return root / "deflectionbench"


def _run(folder: Path, model: str, grades: list[tuple[str, str, str]]) -> Path:
    """An evaluation run folder as `mmcurate evaluate` writes it: answers.parquet and table.md."""
    folder.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([{"sample_id": s, "scenario": c, "grade": g} for s, c, g in grades]),
        folder / "answers.parquet",
    )
    (folder / "table.md").write_text(f"# {model} on deflectionbench 1.1.0 (n = {len(grades)})\n")
    return folder


def test_versions_removals_and_who_removed_them(benchmark):
    history = benchmark_history(benchmark)
    first, second = history.versions
    assert (first.version, first.samples, first.parent, first.removed, first.candidates) == ("1.0.0", 6, None, 0, 18)
    assert (second.version, second.samples, second.parent, second.removed) == ("1.1.0", 4, "1.0.0", 2)
    assert second.removed_by == {"gemma": 2} and second.added_models == ["gemma"]
    assert all("gemma answered from parametric knowledge" in r["reason"] for r in second.removals)


def test_saturation_is_each_models_share_of_what_its_run_asked(benchmark):
    points = {(p.model, p.version): (p.correct, p.asked) for p in benchmark_history(benchmark).saturation}
    # 1.0.0's run asked smollm2 the 10 candidates; 1.1.0's run asked gemma the 6 released samples
    assert points == {("smollm2", "1.0.0"): (2, 10), ("gemma", "1.1.0"): (2, 6)}


def test_leaderboard_rates_with_wilson_intervals_leave_failed_answers_out(benchmark, tmp_path):
    grades = [(f"s{i}", "oracle", "CORRECT" if i < 41 else "INCORRECT") for i in range(60)]
    grades += [("s60", "oracle", "FAILED"), ("s61", "oracle", "JUDGE_ERROR")]
    run = _run(tmp_path / "smollm2", "smollm2", grades)
    rows = benchmark_history(benchmark, [run]).leaderboard
    overall = next(r for r in rows if r["condition"] == "all")
    assert (overall["model"], overall["graded"], overall["left out"]) == ("smollm2", 60, 2)
    assert overall["accuracy"] == pytest.approx(41 / 60)
    # Kestrel's worked example: 41 of 60 -> [0.558, 0.787]
    assert (round(overall["accuracy low"], 3), round(overall["accuracy high"], 3)) == (0.558, 0.787)
    assert overall["missing"] == 0 and [r["condition"] for r in rows] == ["all", "oracle"]


def test_an_evaluation_of_another_benchmark_is_refused(benchmark, tmp_path):
    run = _run(tmp_path / "other", "m", [("s", "oracle", "CORRECT")])
    (run / "table.md").write_text("# m on pope 1.0.0 (n = 1)\n")
    with pytest.raises(ReleaseError, match="evaluates pope 1.0.0, not a version of deflectionbench"):
        benchmark_history(benchmark, [run])


def test_cli_writes_page_and_markdown_beside_the_versions_and_refuses_bad_folders(
    benchmark, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "site"
    code, stdout, err = run_cli(capsys, monkeypatch, "history", str(benchmark), "--out", str(out))
    assert code == 0, err
    assert stdout.strip() == str(out / HISTORY_HTML)
    markdown = (out / HISTORY_MD).read_text()
    assert "| 1.1.0 |" in markdown and "gemma (2)" in markdown and "### Removed in 1.1.0" in markdown
    code, _, err = run_cli(capsys, monkeypatch, "history", str(tmp_path / "nowhere"))
    assert code != 0 and "holds no release version" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, monkeypatch, "history", str(benchmark), "--out", str(benchmark / "1.0.0" / "h"))
    assert code != 0 and "lies inside the release" in err


def test_history_of_a_benchmark_without_gating_says_there_is_no_curve(tmp_path, reflvqa_release):
    root = tmp_path / "releases" / "reflvqa"
    root.mkdir(parents=True)
    (root / "1.0.0").symlink_to(reflvqa_release, target_is_directory=True)
    history = benchmark_history(root)
    assert (
        history.saturation == []
        and "no saturation curve" in write_history(root, tmp_path / "o").with_name(HISTORY_MD).read_text()
    )


PROBE = """JSON.stringify({
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  toc: [...document.querySelectorAll('nav.toc a')].map(a => a.getAttribute('href')),
  images: [...document.images].map(i => ({alt: i.alt, width: i.naturalWidth})),
  removals: [...document.querySelectorAll('ul.removals li')].map(li => li.innerText),
  summary: document.querySelector('#summary').innerText,
})"""


@pytest.mark.skipif(not static_page.CHROMIUM.exists(), reason="headless render needs Debian's chromium")
def test_history_page_renders_in_chromium_with_its_plots(benchmark, tmp_path, tmp_path_factory):
    runs = [
        _run(tmp_path / m, m, [(f"s{i}", "oracle", "CORRECT" if i < k else "INCORRECT") for i in range(10)])
        for m, k in (("smollm2", 3), ("gemma", 7))
    ]
    page = write_history(benchmark, tmp_path / "site", runs)
    shown = static_page.render(page, PROBE, tmp_path_factory.getbasetemp() / "artifacts" / "history")
    assert shown.errors == []
    assert shown.probe["sections"] == ["versions", "removals", "saturation", "leaderboard"]
    assert [h.lstrip("#") for h in shown.probe["toc"]] == shown.probe["sections"]
    widths = {i["alt"]: i["width"] for i in shown.probe["images"]}
    assert {"Saturation curve", "accuracy by model", "hallucination by model", "missing by model"} <= widths.keys()
    assert all(w > 100 for w in widths.values())  # decoded plots, not broken images
    assert len(shown.probe["removals"]) == 2 and all("by gemma" in r for r in shown.probe["removals"])
    assert "the latest, 1.1.0" in shown.probe["summary"]
    assert shown.screenshot.stat().st_size > 20_000
