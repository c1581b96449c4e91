"""The report a reader looks at (issue 45 items 1, 2 and the small points): a summary line and
contents, retention and reason plots, a seeded gallery of kept and removed samples with the
ledger's reasons, near-duplicate pairs side by side; rendered in headless Chromium. Also the
card's default config and licence for ``datasets`` and the release artifact's banner."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mmcurate.core.ledger import Decision, ledger_table
from mmcurate.releases.card import SCRIPTED_BANNER
from mmcurate.releases.gallery import gallery, near_duplicate_pairs
from mmcurate.releases.reader import open_release
from mmcurate.releases.report import render_report, summary_line, write_report
from mmcurate.releases.writer import write_release
from tests import static_page
from tests.releases import release_builders as b


@pytest.fixture(scope="module")
def curated(tmp_path_factory, store_and_shas) -> Path:
    """A release whose run kept 6 samples, dropped 3 (content in its predecessor 1.0.0 beside it)
    and flagged sample 1 as a question near-duplicate of sample 0."""
    store, shas = store_and_shas
    root = tmp_path_factory.mktemp("gallery") / "releases"
    rows = b.deflection_rows(shas, n=9)
    write_release(b.deflection_draft(rows, version="1.0.0"), root, store)
    kept, dropped = rows[:6], rows[6:]
    decisions = [
        Decision(
            r["sample_id"],
            "parametric",
            "gate.verdict",
            "keep",
            detail={"deciding_model": "smollm2", "reason": "no model answered from parametric knowledge"},
        )
        for r in kept
    ]
    decisions += [
        Decision(
            r["sample_id"],
            "oracle",
            "oracle.verdict",
            "drop",
            detail={"reason": "every model answered INCORRECT even with the gold contexts"},
        )
        for r in dropped
    ]
    decisions.append(
        Decision(
            kept[1]["sample_id"],
            "dedup",
            "dedup.question",
            "flagged",
            context_id=kept[0]["sample_id"],
            detail={
                "of": kept[0]["sample_id"],
                "in": "this release",
                "kind": "question",
                "question_jaccard": 0.91,
                "reason": "near-duplicate",
            },
        )
    )
    draft = b.deflection_draft(kept, version="1.1.0", parent="1.0.0")
    draft = replace(
        draft,
        ledger=ledger_table(decisions, run_id="run-1.1.0"),
        counts={**draft.counts, "run_id": "run-1.1.0"},
        components={**draft.components, "near_duplicates": "minhash char-5gram jaccard>=0.8"},
    )
    return write_release(draft, root, store)


def test_gallery_draws_kept_and_removed_per_stage_with_reasons_seeded(curated):
    release = open_release(curated)
    drawn = gallery(release)
    assert list(drawn) == ["parametric", "oracle"]
    assert [i.fate for i in drawn["parametric"]] == ["kept"] * 3 and [i.fate for i in drawn["oracle"]] == [
        "removed"
    ] * 3
    removed = drawn["oracle"]
    # a removed sample's content is read from the version beside it; its reason is the ledger's
    assert all(i.shown.found_in == "deflectionbench 1.0.0" and i.shown.question and i.shown.thumbnail for i in removed)
    assert all("oracle/oracle.verdict: drop in v1.1.0 (every model answered INCORRECT" in i.reason for i in removed)
    assert all(i.shown.found_in == "deflectionbench 1.1.0" for i in drawn["parametric"])
    again = gallery(open_release(curated))
    assert [i.shown.sample_id for i in again["parametric"]] == [i.shown.sample_id for i in drawn["parametric"]]


def test_a_removed_sample_held_nowhere_is_said_so(curated, tmp_path):
    import shutil

    alone = tmp_path / "releases" / "deflectionbench" / "1.1.0"
    shutil.copytree(curated, alone)  # without 1.0.0 beside it and without a workdir
    removed = gallery(open_release(alone))["oracle"]
    assert all(i.shown.found_in is None and i.shown.question is None for i in removed)
    assert "Content not held by this release" in render_report(open_release(alone))


def test_near_duplicate_pairs_show_both_samples_with_the_rule(curated):
    (pair,) = near_duplicate_pairs(open_release(curated))
    assert (
        pair.flagged.question == "What is shown in picture 1?" and pair.other.question == "What is shown in picture 0?"
    )
    assert pair.flagged.thumbnail and pair.other.thumbnail
    assert (pair.kind, pair.scores, pair.other_in) == ("question", "question Jaccard 0.91", "this release")


def test_summary_line_counts_kept_of_entered_by_stage(curated):
    line = summary_line(open_release(curated))
    assert line == "Kept 6 of 18 (33.3%): ingest 18 → gating 8 → mining 6; 2 records quarantined."


def test_one_gating_model_draws_no_convergence_and_a_modelless_release_says_none(tmp_path, store_and_shas):
    store, shas = store_and_shas
    draft = b.deflection_draft(b.deflection_rows(shas))
    one = {**draft.statistics, "convergence": draft.statistics["convergence"][:1]}
    release = write_release(replace(draft, statistics=one, models=[]), tmp_path, store)
    assert "convergence.png" not in open_release(release).manifest.plots.values()
    html = render_report(open_release(release))
    assert "One model: no convergence to draw." in html
    assert "<dt>Models</dt><dd>none (no model took part in its curation)</dd>" in html


PROBE = """JSON.stringify({
  sections: [...document.querySelectorAll('section')].map(s => s.id),
  toc: [...document.querySelectorAll('nav.toc a')].map(a => a.getAttribute('href').slice(1)),
  plots: [...document.querySelectorAll('section img')].filter(i => i.alt && !i.alt.startsWith('image of'))
           .map(i => ({alt: i.alt, width: i.naturalWidth})),
  gallery: [...document.querySelectorAll('#gallery figure')].map(f => ({
      fate: f.className, reason: (f.querySelector('.reason') || {}).innerText || '',
      thumbnail: (f.querySelector('img') || {naturalWidth: 0}).naturalWidth})),
  pairs: [...document.querySelectorAll('#near-duplicates .pair')].map(p => p.querySelectorAll('figure').length),
  summary: document.querySelector('#summary').innerText,
})"""


@pytest.mark.skipif(not static_page.CHROMIUM.exists(), reason="headless render needs Debian's chromium")
def test_report_renders_in_chromium_with_contents_plots_gallery_and_pairs(curated, tmp_path, tmp_path_factory):
    import shutil

    release = tmp_path / "releases" / "deflectionbench"
    shutil.copytree(curated.parent, release)  # report.html is written into the release
    page = write_report(release / "1.1.0")
    shown = static_page.render(page, PROBE, tmp_path_factory.getbasetemp() / "artifacts" / "report")
    assert shown.errors == []
    assert shown.probe["toc"] == shown.probe["sections"]  # every section listed, every link lands
    assert {"overview", "kept-and-removed", "gallery", "near-duplicates", "quarantine"} <= set(shown.probe["sections"])
    plots = {p["alt"]: p["width"] for p in shown.probe["plots"]}
    assert {"Retention per source", "Samples removed, by reason", "Records quarantined, by reason"} <= plots.keys()
    assert all(width > 100 for width in plots.values())
    fates = [g["fate"] for g in shown.probe["gallery"]]
    assert fates.count("kept") == 3 and fates.count("removed") == 3
    assert all(g["reason"] and g["thumbnail"] > 0 for g in shown.probe["gallery"])
    assert shown.probe["pairs"] == [2]
    assert shown.probe["summary"].startswith("Kept 6 of 18")
    assert shown.screenshot.stat().st_size > 20_000


def test_load_dataset_without_a_config_name_loads_the_first_config(tmp_path, reflvqa_release):
    from datasets import load_dataset

    release = open_release(reflvqa_release)
    assert len(release.configs) > 1
    loaded = load_dataset(str(reflvqa_release), cache_dir=str(tmp_path / "cache"))
    (split,) = loaded.values()
    assert split.num_rows == release.manifest.counts.rows[release.samples_config]
    assert "sample_id" in split.column_names


def test_a_licence_every_source_states_is_the_tables_licence(tmp_path, store_and_shas):
    from datasets import load_dataset

    store, shas = store_and_shas
    rows = b.deflection_rows(shas, sources=("evqa",))  # E-VQA states CC BY 4.0
    draft = b.deflection_draft(rows)
    release = write_release(replace(draft, counts={**draft.counts, "per_source": {"evqa": 6}}), tmp_path, store)
    loaded = load_dataset(str(release), cache_dir=str(tmp_path / "cache"))
    assert list(loaded) == ["test"] and loaded["test"].num_rows == 6
    assert loaded["test"].info.license == "cc-by-4.0"


def test_the_release_artifact_carries_the_cards_scripted_banner(curated, tmp_path):
    import shutil

    from mmcurate.tasks.release import release_summary

    copy = tmp_path / "r"
    shutil.copytree(curated, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    assert SCRIPTED_BANNER not in release_summary(copy, ["a note"])
    manifest["models"][0]["backend"] = "scripted"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    text = release_summary(copy, ["a note"])
    assert SCRIPTED_BANNER in text and text.index(SCRIPTED_BANNER) < text.index("Written to") and "- a note" in text
