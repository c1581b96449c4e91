"""Table 6 of MIRROR on a ReflectV release: blind batches from discarded, raw and clean,
ratings imported back, a model rater beside the people, the table printed."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mmcurate.annotation.reflectv.dialogue import BuildDialogues
from mmcurate.annotation.reflectv.formatting import FormatTrajectories
from mmcurate.annotation.reflectv.grounding import GroundAndMark
from mmcurate.annotation.reflectv.reflection import WriteReflections
from mmcurate.annotation.reflectv.trajectory import TrajectoryFilter
from mmcurate.annotation.reflectv.visual import VisualCheck
from mmcurate.core.config import load_config
from mmcurate.core.errors import MmcurateError
from mmcurate.core.images import ImageStore
from mmcurate.core.stages import StageContext
from mmcurate.judging.session import open_models
from mmcurate.releases.reflectv.draft import reflectv_draft
from mmcurate.releases.writer import write_release
from mmcurate.review.reflectv.trajectories import (
    ModelRater,
    export_trajectories,
    import_trajectory_ratings,
    parse_rating,
    read_key,
    read_ratings,
    release_items,
)
from mmcurate.sources.ingest import ingest
from mmcurate.tasks.ingest import load_samples

CONFIG = """workdir: {home}/work
releases_root: {home}/releases
models:
  student: {{backend: scripted, script: {fx}/reflectv_models/student.jsonl, vision: true}}
  teacher: {{backend: scripted, script: {fx}/reflectv_models/teacher.jsonl, vision: true}}
  rewriter: {{backend: scripted, script: {fx}/reflectv_models/rewriter.jsonl}}
  verifier: {{backend: scripted, script: {fx}/reflectv_models/verifier.jsonl, default: "yes", vision: true}}
  rater: {{backend: scripted, script: {home}/rater.jsonl, default: "Logic: 2\\nVisual: 1", vision: true}}
  patchy: {{backend: scripted, script: {home}/patchy.jsonl, vision: true}}
reflectv:
  sources: [{sources}]
  student: student
  teacher: teacher
  rewriter: rewriter
  verifier: verifier
  grounding: "boxes:{fx}"
  seed: 7
  caption_order: after_rewrite  # the scripted rewriter rewrites the bare feedback
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root) -> tuple[Path, Path]:
    """(config, release): the fixtures curated stage by stage, without an orchestrator."""
    home = tmp_path_factory.mktemp("quality")
    sources = ", ".join(
        f"{{name: {n}, root: {fixtures_root / n}}}" for n in ("gqa", "textvqa", "docvqa", "chartqa", "fire")
    )
    config = home / "config.yaml"
    config.write_text(CONFIG.format(home=home, fx=fixtures_root, sources=sources))
    settings = load_config(config)
    cfg, store = settings.reflectv, ImageStore(settings.workdir / "images")
    ingested = [ingest(s.name, s.root, settings.workdir / "ingest" / s.name, store=store) for s in cfg.sources]
    samples, quarantine = load_samples(ingested)
    results, table = [], samples
    with open_models(settings, store) as models:
        ctx = StageContext(settings, "r", store, models)
        for stage in (
            BuildDialogues(cfg.student, cfg.teacher, cfg.max_turns),
            TrajectoryFilter(),
            WriteReflections(cfg.keywords, cfg.rewriter, caption_order=cfg.caption_order),
            GroundAndMark(cfg.grounding, seed=cfg.seed),
            VisualCheck(cfg.verifier),
            FormatTrajectories(cfg.rho, cfg.seed),
        ):
            results.append(stage.run(table, ctx))
            table = results[-1].kept
    draft = reflectv_draft(settings, "1.0.0", "r", ingested, samples, quarantine, results)
    release = write_release(draft, settings.releases_root, store)
    # the model rater likes exactly the released chains (it reads the text; the subset is hidden)
    items = release_items(release)
    (home / "rater.jsonl").write_text(
        "".join(
            json.dumps(
                {"when_all": [f"Question: {item['question']}\n", item["trajectory"]], "answer": "Logic: 5\nVisual: 4"}
            )
            + "\n"
            for item in items["clean"]
        )
    )
    # rates only what is not clean (no default): every clean item is a failed call
    clean = {(item["question"], item["trajectory"]) for item in items["clean"]}
    (home / "patchy.jsonl").write_text(
        "".join(
            json.dumps(
                {"when_all": [f"Question: {item['question']}\n", item["trajectory"]], "answer": "Logic: 3\nVisual: 3"}
            )
            + "\n"
            for subset in ("raw", "discarded")
            for item in items[subset]
            if (item["question"], item["trajectory"]) not in clean
        )
    )
    return config, release


def test_subsets_are_shown_in_one_form(built) -> None:
    """Table 6 is blind: raw, discarded and clean items look alike; only their content differs."""
    import polars as pl

    items = release_items(built[1])
    assert {k: len(v) for k, v in items.items()} == {"discarded": 6, "raw": 17, "clean": 9}
    for rows in items.values():
        for item in rows:
            turns = item["trajectory"].split("\n")
            assert all(
                t.startswith(f"Turn {k}: <answer>") and t.endswith("</tool_call>") for k, t in enumerate(turns, 1)
            )
            assert len(item["images"]) == len(turns) and "teacher (score" not in item["trajectory"]
    raw = {r["sample_id"]: r for r in items["raw"]}
    released = pl.read_parquet(str(built[1] / "data" / "trajectories-*.parquet")).to_dicts()
    for clean in items["clean"]:  # a clean item is its released conversation, and reads the same in raw
        [row] = [r for r in released if r["sample_id"] == clean["sample_id"]]
        assert clean["trajectory"] == "\n".join(f"Turn {t['turn']}: {t['text']}" for t in row["conversation"])
        assert raw[clean["sample_id"]] == clean

    # a chain rejected after its marks were drawn shows its marked image, as a clean one does
    def distinct(item):
        return len({image["path"] for image in item["images"]})

    assert any(distinct(i) > 1 for i in items["discarded"]) and all(distinct(i) > 1 for i in items["clean"])


def test_export_is_seeded_blind_and_capped(built, tmp_path) -> None:
    first = export_trajectories(built[1], tmp_path / "a", n=4, seed=3)
    again = export_trajectories(built[1], tmp_path / "b", n=4, seed=3)
    assert first.drawn == {"discarded": 4, "raw": 4, "clean": 4}
    assert first.jsonl.read_text() == again.jsonl.read_text()
    rows = [json.loads(line) for line in first.jsonl.read_text().splitlines()]
    assert set(rows[0]) == {
        "item_id",
        "question",
        "ground_truth",
        "trajectory",
        "images",
        "logic",
        "visual",
        "annotator",
    }
    assert all((tmp_path / "a" / "images" / name).is_file() for row in rows for name in row["images"])
    assert "subset" not in first.jsonl.read_text()  # the key says which subsets, raters do not see it
    key = read_key(tmp_path / "a")
    assert sorted(s for k in key.values() for s in k["subsets"]) == ["clean"] * 4 + ["discarded"] * 4 + ["raw"] * 4
    assert first.items == len(rows) == len(key) <= 12
    everything = export_trajectories(built[1], tmp_path / "c")  # default 100 each: all there are
    assert everything.drawn == {"discarded": 6, "raw": 17, "clean": 9}
    # issue 31 item 15: each dialogue once (every clean and discarded one is raw too): 17 items, not 32
    texts = [json.loads(line)["trajectory"] for line in everything.jsonl.read_text().splitlines()]
    assert everything.items == len(texts) == len(set(texts)) == 17
    subsets = {k["sample_id"]: k["subsets"] for k in read_key(tmp_path / "c").values()}
    assert sum(s == ["raw"] for s in subsets.values()) == 17 - 6 - 9
    assert sorted(map(tuple, subsets.values()))[-1] in {("discarded", "raw"), ("raw", "clean")}
    with pytest.raises(MmcurateError, match="immutable"):
        export_trajectories(built[1], built[1] / "batch")


def _kind(subsets: list[str]) -> str:
    """What a rater who could see it would call an item: clean or discarded before raw."""
    return next(s for s in ("clean", "discarded", "raw") if s in subsets)


def _rated(batch: Path, target: Path, name: str, score) -> Path:
    rows = [json.loads(line) for line in (batch / "batch.jsonl").read_text().splitlines()]
    key = read_key(batch)
    for row in rows:
        row["logic"], row["visual"] = score(_kind(key[row["item_id"]]["subsets"]))
        row["annotator"] = name
    target.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return target


def test_import_prints_table6_with_people_and_a_model(built, tmp_path) -> None:
    config, release = built
    export_trajectories(release, tmp_path / "batch", n=3, seed=0)
    scores = {"discarded": (2, 1), "raw": (3, 3), "clean": (5, 5)}
    alice = _rated(tmp_path / "batch", tmp_path / "alice.jsonl", "alice", scores.get)
    bob = _rated(tmp_path / "batch", tmp_path / "bob.jsonl", "bob", lambda s: (scores[s][0] - 1 or 1, scores[s][1]))
    settings = load_config(config)
    store = ImageStore(settings.workdir / "images")
    with open_models(settings, store) as models:
        result = import_trajectory_ratings(
            tmp_path / "batch", [alice, bob], tmp_path / "out", ModelRater(models.pool, "rater", store)
        )
    table = {row["subset"]: row for row in result.table}
    clean, noise = table["D_clean (released)"], table["D_noise (discarded)"]
    assert (clean["human_logic"], clean["human_visual"], clean["model_logic"], clean["model_visual"]) == (4.5, 5, 5, 4)
    assert (noise["human_logic"], noise["model_logic"], noise["model_visual"]) == (1.5, 2, 1)
    assert clean["average_logic"] == 4.75 and noise["items"] == 3
    ratings = pq.read_table(result.ratings_path).to_pylist()
    key = read_key(tmp_path / "batch")
    assert len(ratings) == len(key) * 3 and {r["kind"] for r in ratings} == {"human", "model"}
    assert "| D_clean (released) | 3 | 4.5 | 5 | 5 | 4 | 4.75 | 4.5 |" in result.markdown
    # raw's row: every item drawn for raw, whatever else it was drawn for, rated once
    raw = [r for r in ratings if "raw" in r["subsets"] and r["kind"] == "human"]
    assert table["D_raw (unfiltered)"]["human_logic"] == round(sum(r["logic"] for r in raw) / len(raw), 2)


def test_table6_counts_an_item_in_every_subset_it_was_drawn_for() -> None:
    """Issue 31 item 15: one rating of an item drawn for raw and clean counts in both rows."""
    from mmcurate.review.reflectv.trajectories import table6

    key = {"a": {"subsets": ["raw", "clean"]}, "b": {"subsets": ["raw"]}, "c": {"subsets": ["discarded", "raw"]}}
    ratings = [
        {"item_id": i, "subsets": key[i]["subsets"], "kind": "human", "logic": logic, "visual": logic}
        for i, logic in (("a", 5), ("b", 3), ("c", 1))
    ]
    rows = {r["subset"]: (r["items"], r["human_logic"]) for r in table6(key, ratings)}
    assert rows == {"D_noise (discarded)": (1, 1), "D_raw (unfiltered)": (3, 3), "D_clean (released)": (1, 5)}


def test_bad_ratings_fail_with_their_place(built, tmp_path) -> None:
    export_trajectories(built[1], tmp_path / "batch", n=2, seed=0)
    rows = [json.loads(line) for line in (tmp_path / "batch" / "batch.jsonl").read_text().splitlines()]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "".join(json.dumps({**r, "logic": 6 if i == 1 else 3, "visual": 2}) + "\n" for i, r in enumerate(rows))
    )
    with pytest.raises(MmcurateError, match=r"bad\.jsonl:2: logic is 6; expected an integer from 1 to 5"):
        import_trajectory_ratings(tmp_path / "batch", [bad], tmp_path / "out")
    half = tmp_path / "half.jsonl"
    half.write_text(json.dumps({**rows[0], "logic": 3, "visual": ""}) + "\n")
    with pytest.raises(MmcurateError, match=r"half\.jsonl:1: visual is empty"):
        import_trajectory_ratings(tmp_path / "batch", [half], tmp_path / "out")
    stranger = tmp_path / "stranger.jsonl"
    stranger.write_text(json.dumps({"item_id": "nope", "logic": 3, "visual": 3}) + "\n")
    with pytest.raises(MmcurateError, match="not an item of this batch"):
        import_trajectory_ratings(tmp_path / "batch", [stranger], tmp_path / "out")


def test_rating_replies_are_read_strictly() -> None:
    assert parse_rating("Logic: 4\nVisual: 2") == (4, 2)
    assert parse_rating("logic: 5\n\nVISUAL: 5 ") == (5, 5)
    assert parse_rating("Logic: 6\nVisual: 2") is None and parse_rating("Logic 4, Visual 2") is None


CLEAN_ROW = "| D_clean (released) | 2 | 4 | 4 | 5 | 4 | 4.5 | 4 |"  # carol's 4s beside the rater's


def _import_cli(config: Path, tmp_path: Path, rater: str) -> str:
    """``mmcurate annotate import-trajectories`` of carol's 4s on the batch in ``tmp_path / "b"``
    into ``tmp_path / "v"``, with ``rater`` as the model rater; the command's output."""
    from typer.testing import CliRunner

    from mmcurate.cli import app

    rated = _rated(tmp_path / "b", tmp_path / "carol.jsonl", "carol", lambda s: (4, 4))
    out = CliRunner().invoke(
        app,
        [
            "annotate",
            "import-trajectories",
            str(tmp_path / "b"),
            str(rated),
            "--out",
            str(tmp_path / "v"),
            "--rater",
            rater,
            "--config",
            str(config),
        ],
    )
    assert out.exit_code == 0, out.output
    return out.output


def test_cli_round_trip(built, tmp_path) -> None:
    from typer.testing import CliRunner

    from mmcurate.cli import app

    config, release = built
    out = CliRunner().invoke(
        app, ["annotate", "export-trajectories", str(release), "--out", str(tmp_path / "b"), "--n", "2"]
    )
    assert out.exit_code == 0, out.output
    assert "each dialogue once (drawn: discarded 2 of 6, raw 2 of 17, clean 2 of 9)" in out.output
    output = _import_cli(config, tmp_path, "rater")
    assert "ratings from carol and rater" in output and CLEAN_ROW in output


def test_the_rater_may_be_a_model_file_as_the_model_of_evaluate_may(built, tmp_path) -> None:
    """Issue 42 item 22: ``--rater`` refused a YAML model file where ``--model`` accepts one."""
    config, release = built
    export_trajectories(release, tmp_path / "b", n=2, seed=0)
    spec = tmp_path / "rater-file.yaml"
    spec.write_text(
        f"name: rater-file\nbackend: scripted\nscript: {config.parent / 'rater.jsonl'}\n"
        'default: "Logic: 2\\nVisual: 1"\nvision: true\n'
    )
    output = _import_cli(config, tmp_path, str(spec))
    assert "ratings from carol and rater-file" in output and CLEAN_ROW in output


def test_a_failing_rater_is_said_never_a_silent_success(built, tmp_path) -> None:
    config, release = built
    export_trajectories(release, tmp_path / "b", n=2, seed=0)
    out = _import_cli(config, tmp_path, "patchy")
    assert (
        "mmcurate: warning: model 'patchy' failed 2 of 6 calls (first error: model call failed: no scripted rule "
        "matched and the model has no default)"
    ) in out
    assert json.loads((tmp_path / "v" / "table6.json").read_text())["model_errors"] == 2
    dead = tmp_path / "clean-only"
    export_trajectories(release, dead, n=2, seed=0)
    key = read_key(dead)
    (dead / "key.jsonl").write_text(
        "".join(
            json.dumps(item) + "\n"
            for item in key.values()
            if item["subsets"] == ["clean"] or "clean" in item["subsets"]
        )
    )
    settings = load_config(config)
    store = ImageStore(settings.workdir / "images")
    with open_models(settings, store) as models, pytest.raises(MmcurateError) as refused:
        import_trajectory_ratings(dead, [], tmp_path / "v2", ModelRater(models.pool, "patchy", store))
    assert str(refused.value).startswith("the rater rated no item: model 'patchy' failed 2 of 2 calls (first error: ")
    assert not (tmp_path / "v2").exists()


def test_a_rated_csv_saved_with_a_byte_order_mark_reads_as_a_labelled_one_does(tmp_path) -> None:
    """Rated files are read by review.batches.read_records, as labelled files are: a spreadsheet's
    byte-order mark is no part of the first column's name, and the errors name rated rows."""
    rated = tmp_path / "rated.csv"
    rated.write_text("item_id,logic,visual,annotator\na,4,2,ann\n", encoding="utf-8-sig")
    assert read_ratings(rated, {"a"}) == ("ann", {"a": (4, 2)})
    (tmp_path / "rated.txt").write_text("")
    with pytest.raises(MmcurateError, match=r"rated\.txt: rated files must be \.csv or \.jsonl"):
        read_ratings(tmp_path / "rated.txt", {"a"})
