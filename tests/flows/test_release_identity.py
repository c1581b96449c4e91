"""A release is its data, the configuration that decides it and its models.

On scripted models (no server): a rerun with the same settings returns the existing release;
a rerun whose configuration (k_min from the environment) or models (a re-curation with
another model) differ from the release of its version is refused with one line naming the
difference, before the pipeline starts. Manifests and cards name no directory of the
machine that built them, so a release copied elsewhere re-curates beside itself.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mmcurate.releases.errors import ReleaseExists
from mmcurate.releases.manifest import ABSOLUTE_PATH
from mmcurate.releases.reader import list_versions, open_release
from mmcurate.releases.verify import verify_release

import flowkit  # noqa: E402

pytestmark = pytest.mark.slow
PARROT = {"backend": "scripted", "script": str(flowkit.DRYRUN / "llm-guesser.jsonl"), "default": "Atlantis",
          "revision": "parrot-1"}


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path]:
    from mmcurate.flows.deflectionbench import deflectionbench

    home = tmp_path_factory.mktemp("identity") / "home"
    config = flowkit.scripted_config(home, fixtures_root, models={"vlm-reader": flowkit.READER,
                                                                  "llm-guesser": flowkit.GUESSER, "parrot": PARROT},
                                     pool=["vlm-reader"])
    return home, config, Path(deflectionbench(config=str(config)))


def test_release_is_not_empty_and_a_rerun_returns_it(built):
    from mmcurate.flows.deflectionbench import deflectionbench

    home, config, release = built
    assert open_release(release).sample_ids and verify_release(release).ok
    manifest = (release / "manifest.json").read_bytes()
    assert Path(deflectionbench(config=str(config))) == release
    assert (release / "manifest.json").read_bytes() == manifest


def test_other_settings_under_the_same_version_are_refused_before_the_pipeline(built, monkeypatch):
    from mmcurate.flows.deflectionbench import deflectionbench

    home, config, release = built
    monkeypatch.setenv("MMCURATE_DEFLECTIONBENCH__K_MIN", "6")
    monkeypatch.setenv("MMCURATE_WORKDIR", str(home / "fresh-work"))  # where this run would ingest
    with pytest.raises(ReleaseExists) as refused:
        deflectionbench(config=str(config))
    message = str(refused.value)
    assert "\n" not in message and "deflectionbench 1.0.0 exists" in message
    assert "deflectionbench.k_min: 3 -> 6" in message and "--version" in message
    assert not (home / "fresh-work").exists()  # refused before ingesting anything
    assert open_release(release).manifest["k_min"] == 3


def test_recuration_with_another_model_is_refused_naming_it(built):
    from mmcurate.flows.recurate import recurate

    home, config, release = built
    first = Path(recurate(release=str(release), add_model=["llm-guesser"], config=str(config)))
    assert first.name == "1.1.0"
    assert Path(recurate(release=str(release), add_model=["llm-guesser"], config=str(config))) == first
    with pytest.raises(ReleaseExists) as refused:
        recurate(release=str(release), add_model=["parrot"], config=str(config))
    message = str(refused.value)
    assert "deflectionbench 1.1.0 exists" in message and "gating.pool" in message and "parrot" in message
    assert "models.gating:parrot" in message or "models.gating:llm-guesser" in message
    assert [m["name"] for m in open_release(first).manifest["models"]] == ["vlm-reader", "llm-guesser"]


def test_manifests_and_cards_carry_no_absolute_path(built):
    home, _, release = built
    for file in ("manifest.json", "README.md"):
        text = (release / file).read_text()
        assert ABSOLUTE_PATH.findall(text) == [], file
        assert str(home) not in text
    config = open_release(release).manifest["config"]  # relative to the release folder
    assert config["releases_root"] == "../.." and config["workdir"] == "../../../work"


def test_a_copied_release_recurates_beside_itself(built, tmp_path):
    from mmcurate.flows.recurate import recurate

    home, _, release = built
    # another machine's layout at the same depth: the manifest's relative paths still reach the
    # scripts; the workdir it names is a fresh one there
    moved = tmp_path / "home" / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(release, moved)
    new = Path(recurate(release=str(moved), add_model=["llm-guesser"]))
    assert new == moved.parent / "1.1.0"
    assert verify_release(new).ok and open_release(new).manifest["parent"] == "1.0.0"
    assert list_versions(tmp_path / "home" / "releases", "deflectionbench") == ["1.0.0", "1.1.0"]
    assert (tmp_path / "home" / "work" / "responses.sqlite").is_file()  # the manifest's workdir, resolved here
