"""Re-curation of DeflectionBench, on scripted models (issue 22 items 4, 5, 8; issue 27).

- The parent's ledger decides for the original models: with an empty workdir (no response
  cache) no request reaches them, and the result is the one the cached re-curation gives.
- The parent is recorded by version and content id; a re-curation writing beside another
  release of the parent's version is refused.
- A moved release's recorded workdir that exists nowhere is refused (nothing created).
- The new version carries CHANGELOG.md (sealed, in the card) naming the removal and its model.
- Over a budget, nothing is called.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.models.client import ModelClient
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.manifest import load_manifest, seal
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit
from tests.releases.cli_helpers import run_cli

pytestmark = pytest.mark.slow
HUBBLE = "Question: In what year was the Hubble Space Telescope launched?"


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path, Path]:
    """The scripted release, re-curated once in place (with its response cache) with a "knower"
    that knows one released answer by heart: (home, config, 1.0.0, 1.1.0)."""
    from mmcurate.flows.deflectionbench.curate import deflectionbench
    from mmcurate.flows.recurate import recurate_release

    home = tmp_path_factory.mktemp("ledger") / "home"
    home.mkdir()
    knower = home / "knower.jsonl"
    knower.write_text(json.dumps({"when_all": [HUBBLE], "when_none": ["Evidence:"], "answer": "1990"}) + "\n")
    config = flowkit.scripted_config(
        home,
        fixtures_root,
        pool=["vlm-reader"],
        models={
            "vlm-reader": flowkit.READER,
            "knower": {"backend": "scripted", "script": str(knower), "default": "Atlantis", "revision": "knower-1"},
        },
    )
    release = Path(deflectionbench(config=str(config)))
    return home, config, release, Path(recurate_release(release=str(release), add_model=["knower"], config=str(config)))


def _copy(release: Path, home: Path, tmp_path: Path, folder: str = "deflectionbench") -> Path:
    """The release and the knower's script at the same depth elsewhere (another machine's layout)."""
    moved = tmp_path / "home" / "releases" / folder / "1.0.0"
    shutil.copytree(release, moved)
    shutil.copy(home / "knower.jsonl", tmp_path / "home" / "knower.jsonl")
    return moved


def test_without_the_cache_only_the_new_model_is_asked(built, tmp_path, asked, caplog):
    from mmcurate.flows.recurate import recurate_release

    home, _, release, cached = built
    moved = _copy(release, home, tmp_path)
    (tmp_path / "home" / "work").mkdir()  # an empty workdir: no responses.sqlite
    with caplog.at_level(logging.INFO):
        new = Path(recurate_release(release=str(moved), add_model=["knower"]))
    assert set(asked) == {"knower"} and asked["knower"] > 0  # no request reached vlm-reader
    # the calls the run log states are the card's, and its requests are those calls and cache hits
    card = [r for r in open_release(new).manifest.statistics["calls"] if r["step"] != "total"]
    assert flowkit.logged_calls(caplog.text) == {
        (r["step"], r["model"]): (r["calls"], r["cache_hits"], r["failures"]) for r in card
    }
    assert flowkit.logged_requests(caplog.text) == {(r["step"], r["model"]): r["calls"] + r["cache_hits"] for r in card}
    assert open_release(new).sample_ids == open_release(cached).sample_ids
    ledger = open_release(new).ledger.to_pylist()
    reused = [r for r in ledger if r["model"] == "vlm-reader" and "recorded_in" in json.loads(r["detail"])]
    assert reused and all(json.loads(r["detail"])["recorded_in"] == "1.0.0" for r in reused)


def test_the_next_version_is_written_beside_the_release_whatever_its_folder(built, tmp_path):
    """Issue 42 item 20: a release at ``r7/1.0.0`` is re-curated into ``r7/1.1.0`` (it went to
    ``../../deflectionbench/1.1.0``, the benchmark's name under the folder above)."""
    from mmcurate.flows.recurate import recurate_release

    home, _, release, _ = built
    moved = _copy(release, home, tmp_path, folder="r7")
    (tmp_path / "home" / "work").mkdir()
    new = Path(recurate_release(release=str(moved), add_model=["knower"]))
    assert new == moved.parent / "1.1.0" and verify_release(new).ok
    assert sorted(p.name for p in (tmp_path / "home" / "releases").iterdir()) == ["r7"]
    assert sorted(p.name for p in moved.parent.iterdir()) == ["1.0.0", "1.1.0"]


def test_the_parent_is_recorded_by_content_id_and_checked(built, tmp_path):
    from mmcurate.flows.recurate import recurate_release

    home, config, release, cached = built
    assert open_release(cached).manifest.parent.recorded() == {
        "version": "1.0.0",
        "content_id": open_release(release).manifest.sealed,
    }
    # another config whose releases_root holds another 1.0.0 (other content, so another content id)
    other = flowkit.scripted_config(
        tmp_path / "other",
        flowkit.REPO / "tests" / "fixtures" / "generated",
        pool=["vlm-reader"],
        models={"vlm-reader": flowkit.READER},
    )
    sibling = tmp_path / "other" / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(release, sibling)
    (sibling / "README.md").write_text("another card\n")
    seal(sibling, {k: v for k, v in load_manifest(sibling).recorded().items() if k not in ("files", "sealed")})
    assert verify_release(sibling).ok
    spec = tmp_path / "knower.yaml"  # the knower as a model file: the other config does not define it
    spec.write_text(
        json.dumps(
            {
                "name": "knower",
                "backend": "scripted",
                "script": str(home / "knower.jsonl"),
                "default": "Atlantis",
                "revision": "knower-1",
            }
        )
    )
    with pytest.raises(ReleaseError) as refused:
        recurate_release(release=str(release), add_model=[str(spec)], config=str(other))
    assert "\n" not in str(refused.value) and "content ids differ" in str(refused.value)
    assert not (sibling.parent / "1.1.0").exists()
    # verify checks it too: 1.1.0 beside another 1.0.0 than its parent does not verify
    shutil.copytree(cached, sibling.parent / "1.1.0")
    problems = verify_release(sibling.parent / "1.1.0").problems()
    assert problems and "parent 1.0.0 beside it has content id" in problems[0]


def test_a_moved_release_with_a_workdir_that_is_nowhere_is_refused(built, tmp_path):
    from mmcurate.flows.recurate import recurate_release

    home, config, release, _ = built
    moved = tmp_path / "shallow" / "1.0.0"  # recorded workdir ../../../work climbs out of tmp_path
    shutil.copytree(release, moved)
    with pytest.raises(ConfigError) as refused:
        recurate_release(release=str(moved), add_model=["knower"])
    message = str(refused.value)
    assert "\n" not in message and "does not exist here" in message and "--config" in message
    assert not (tmp_path.parent / "work").exists() and list(moved.parent.iterdir()) == [moved]
    # with a config, its paths are used: the re-curation is the one already published beside it
    again = Path(recurate_release(release=str(moved), add_model=["knower"], config=str(config)))
    assert again.parent == home / "releases" / "deflectionbench"


def test_the_new_version_has_a_changelog_in_its_card(built):
    home, _, release, cached = built
    changelog = (cached / "CHANGELOG.md").read_text()
    removed = open_release(cached).manifest.removed
    assert len(removed) == 1
    sid = removed[0]["sample_id"]
    assert "## 1.1.0: re-curation of 1.0.0" in changelog and "gating: `knower`" in changelog
    assert f"- `{sid}` (webqa): " in changelog and "[model `knower`]" in changelog
    assert "No evaluation run of deflectionbench 1.0.0" in changelog and "## 1.0.0" in changelog
    assert "CHANGELOG.md" in open_release(cached).manifest.files and verify_release(cached).ok
    card = (cached / "README.md").read_text()
    assert "## Changes" in card and f"`{sid}`" in card
    for version in (release, cached):  # a DeflectionBench report has its sections, each once
        sections = flowkit.report_sections(version)
        assert set(flowkit.DEFLECTION_SECTIONS) <= set(sections) and len(sections) == len(set(sections)), sections
        assert (version / "report.html").read_text().count("<th>before_pct</th>") == 1  # the topic table once
        assert (version / "README.md").read_text().count("| topic | before |") == 1  # in the card too


def test_over_budget_nothing_is_called(built, tmp_path, monkeypatch):
    from mmcurate.flows.recurate import recurate_release

    home, config, release, _ = built
    called: list[str] = []
    monkeypatch.setattr(ModelClient, "chat", lambda self, requests, stage: called.append(self.spec.name))
    with pytest.raises(ReleaseError) as refused:
        recurate_release(release=str(release), add_model=["knower"], config=str(config), version="1.2.0", max_calls=3)
    assert "over --max-calls 3: nothing was called" in str(refused.value) and called == []
    assert not (release.parent / "1.2.0").exists()


def test_the_command_checks_before_prefect_starts(built, tmp_path, capsys, monkeypatch):
    home, config, release, _ = built
    code, _, err = run_cli(
        capsys, monkeypatch, "recurate", str(release), "--add-model", "teacher=knower", "--config", str(config)
    )
    assert code == 2 and err.count("\n") == 1 and "deflectionbench takes the roles gating" in err
    moved = tmp_path / "shallow" / "1.0.0"
    shutil.copytree(release, moved)
    code, _, err = run_cli(capsys, monkeypatch, "recurate", str(moved), "--add-model", "knower")
    assert code == 2 and err.count("\n") == 1 and "does not exist here" in err


def test_ingested_means_one_thing_in_both_cards(built):
    """ "ingested" is what was read from the raw sources, in the first release and in its
    re-curation alike (which inherits it); the re-curation's input, the parent's samples, is
    "in 1.0.0", as in its CHANGELOG."""
    _, _, release, cached = built
    first, second = (open_release(p).manifest for p in (release, cached))
    assert first.statistics["funnel"][0] == {"stage": "ingested", "remaining": 24}
    assert second.statistics["funnel"][0] == {"stage": "in 1.0.0", "remaining": 4}
    assert all(row["stage"] != "ingested" for row in second.statistics["funnel"])
    parent_rows = {r["source"]: r for r in first.statistics["per_source"]}
    for row in second.statistics["per_source"]:
        was = parent_rows[row["source"]]
        assert (row["ingested"], row["in 1.0.0"]) == (was["ingested"], was["retained"])
        assert row["retention_pct"] == round(100.0 * row["retained"] / row["ingested"], 2)
        assert second.counts.per_source[row["source"]]["ingested"] == was["ingested"]
    card = (cached / "README.md").read_text()
    assert "| source | ingested | in 1.0.0 | retained | retention_pct |" in card
    assert "| mmdocrag | 12 | 2 | 2 | 16.67 |" in card and "| in 1.0.0 | 4 |" in card
