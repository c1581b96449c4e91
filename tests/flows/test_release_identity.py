"""A release is its data, the configuration that decides it and its models.

On scripted models (no server): a rerun with the same settings returns the existing release;
a rerun whose configuration (k_min from the environment) or models (a re-curation with
another model) differ from the release of its version is refused with one line naming the
difference, before the pipeline starts. Manifests and cards name no directory of the
machine that built them, so a release copied elsewhere re-curates beside itself.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmcurate.models.cache import ResponseCache
from mmcurate.releases.errors import ReleaseExists
from mmcurate.releases.manifest import ABSOLUTE_PATH
from mmcurate.releases.reader import list_versions, open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow
PARROT = {
    "backend": "scripted",
    "script": str(flowkit.DRYRUN / "llm-guesser.jsonl"),
    "default": "Atlantis",
    "revision": "parrot-1",
}  # another model, for a re-curation under a version taken already


HUBBLE = "Question: In what year was the Hubble Space Telescope launched?"


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path]:
    """The scripted release, and a "knower" model that knows one released answer by heart."""
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home = tmp_path_factory.mktemp("identity") / "home"
    home.mkdir()
    knower = home / "knower.jsonl"
    knower.write_text(json.dumps({"when_all": [HUBBLE], "when_none": ["Evidence:"], "answer": "1990"}) + "\n")
    config = flowkit.scripted_config(
        home,
        fixtures_root,
        pool=["vlm-reader"],
        models={
            "vlm-reader": flowkit.READER,
            "parrot": PARROT,
            "knower": {"backend": "scripted", "script": str(knower), "default": "Atlantis", "revision": "knower-1"},
        },
    )
    return home, config, Path(deflectionbench(config=str(config)))


def test_release_is_not_empty_and_a_rerun_returns_it(built):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home, config, release = built
    assert open_release(release).sample_ids and verify_release(release).ok
    manifest = (release / "manifest.json").read_bytes()
    assert Path(deflectionbench(config=str(config))) == release
    assert (release / "manifest.json").read_bytes() == manifest


def test_other_settings_under_the_same_version_are_refused_before_the_pipeline(built, monkeypatch):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home, config, release = built
    monkeypatch.setenv("MMCURATE_DEFLECTIONBENCH__K_MIN", "6")
    monkeypatch.setenv("MMCURATE_WORKDIR", str(home / "fresh-work"))  # where this run would ingest
    with pytest.raises(ReleaseExists) as refused:
        deflectionbench(config=str(config))
    message = str(refused.value)
    assert "\n" not in message and "deflectionbench 1.0.0 exists" in message
    assert "deflectionbench.k_min: 3 -> 6" in message and "--version" in message
    assert not (home / "fresh-work").exists()  # refused before ingesting anything
    assert open_release(release).manifest.k_min == 3


def test_recuration_calls_only_the_new_model_and_explains_removals(built):
    from mmcurate.flows.recurate import recurate_release

    home, config, release = built
    with ResponseCache.open(f"sqlite:///{flowkit.cache_path(home)}") as cache:
        reader_answers = cache.count("vlm-reader")
    new = Path(recurate_release(release=str(release), add_model=["knower"], config=str(config)))
    assert new.name == "1.1.0" and open_release(new).manifest.parent.recorded() == {
        "version": "1.0.0",
        "content_id": open_release(release).manifest.sealed,
    }
    assert verify_release(new).ok  # its sealed body and its counts per source, against its data
    with ResponseCache.open(f"sqlite:///{flowkit.cache_path(home)}") as cache:
        assert cache.count("vlm-reader") == reader_answers  # the earlier model: cache hits only
    calls = [r for r in open_release(new).manifest.statistics["calls"] if r["step"] != "total"]
    assert {r["model"] for r in calls if r["calls"]} == {"knower"}
    old_ids, new_ids = set(open_release(release).sample_ids), set(open_release(new).sample_ids)
    removed = {r["sample_id"]: r for r in open_release(new).manifest.removed}
    assert len(removed) == 1 and set(removed) == old_ids - new_ids  # the Hubble question
    (record,) = removed.values()
    assert record["removed_in"] == "1.1.0" and "knower was not judged INCORRECT" in record["reason"]


def test_recuration_with_another_model_is_refused_naming_it(built):
    from mmcurate.flows.recurate import recurate_release

    home, config, release = built
    first = Path(recurate_release(release=str(release), add_model=["knower"], config=str(config)))  # a rerun
    assert first.name == "1.1.0"
    with pytest.raises(ReleaseExists) as refused:
        recurate_release(release=str(release), add_model=["parrot"], config=str(config))
    message = str(refused.value)
    assert "deflectionbench 1.1.0 exists" in message and "gating.pool" in message and "parrot" in message
    assert [m.name for m in open_release(first).manifest.models] == ["vlm-reader", "knower"]


def test_manifests_and_cards_carry_no_absolute_path(built):
    home, _, release = built
    for file in ("manifest.json", "README.md"):
        text = (release / file).read_text()
        assert ABSOLUTE_PATH.findall(text) == [], file
        assert str(home) not in text
    config = open_release(release).manifest.config  # relative to the release folder
    assert config["releases_root"] == "../.." and config["workdir"] == "../../../work"


def test_a_copied_release_recurates_beside_itself(built, tmp_path):
    from mmcurate.flows.recurate import recurate_release

    home, _, release = built
    # another machine's layout, release and model script alike: the manifest's paths are relative
    # to the release, so they reach the script there and the (fresh) workdir prepared there
    moved = tmp_path / "home" / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(release, moved)
    shutil.copy(home / "knower.jsonl", tmp_path / "home" / "knower.jsonl")
    (tmp_path / "home" / "work").mkdir()  # the workdir there (a fresh one: no response cache)
    new = Path(recurate_release(release=str(moved), add_model=["knower"]))
    assert new == moved.parent / "1.1.0"
    assert verify_release(new).ok and open_release(new).manifest.parent.version == "1.0.0"
    assert list_versions(tmp_path / "home" / "releases", "deflectionbench") == ["1.0.0", "1.1.0"]
    assert (tmp_path / "home" / "work" / "responses.sqlite").is_file()  # the manifest's workdir, resolved here
