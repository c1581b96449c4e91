"""A release's identity includes the content of its inputs (issue 22, item 7): a scripted
model's rules file or a raw source file that changed under the same name makes another
release, never "identical content: unchanged"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mmcurate.core.config import Settings
from mmcurate.releases.errors import ReleaseExists
from mmcurate.releases.reader import open_release
from mmcurate.releases.rerun import draft_differences, refuse_changed_version
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b


def settings_of(tmp_path, rules) -> Settings:
    return Settings(
        releases_root=tmp_path / "releases",
        models={"reader": {"name": "reader", "backend": "scripted", "script": rules, "revision": "r1"}},
        deflectionbench={
            "sources": [{"name": "webqa", "root": tmp_path}],
            "gating": {"pool": ["reader"]},
            "k_min": b.K_MIN,
            "seed": b.SEED,
        },
    )


@pytest.fixture
def inputs(tmp_path):
    """A rules file and a raw source file the draft names, and a published release of it."""
    rules, source = tmp_path / "rules.jsonl", tmp_path / "raw" / "val.jsonl"
    rules.write_text('{"when_all": ["Question:"], "answer": "Paris"}\n')
    source.parent.mkdir()
    source.write_text('{"id": 1}\n')
    settings = settings_of(tmp_path, rules)
    store, shas = b.make_store(tmp_path / "images")
    draft = replace(
        b.deflection_draft(b.deflection_rows(shas)),
        config=settings.resolved(),
        models=[{"role": "gating", **settings.model("reader").identity()}],
        source_files=[str(source)],
    )
    release = write_release(draft, tmp_path / "releases", store)
    return rules, source, draft, release


def test_the_manifest_records_the_content_of_every_input(inputs):
    rules, source, draft, release = inputs
    manifest = open_release(release).manifest
    assert list(manifest.inputs) == ["models.reader.script"]
    assert draft_differences(open_release(release), draft) == []  # the same inputs: a rerun


def test_a_changed_rules_file_is_another_release(inputs):
    rules, _, draft, release = inputs
    rules.write_text('{"when_all": ["Question:"], "answer": "Lyon"}\n')  # same name, other rules
    [diff] = draft_differences(open_release(release), draft)
    assert diff.startswith("input models.reader.script: content ")


def test_a_changed_source_file_is_another_release(inputs):
    _, source, draft, release = inputs
    source.write_text('{"id": 2}\n')
    assert draft_differences(open_release(release), draft) == [
        "source files: their content differs from the 1 the release recorded"
    ]


def test_a_run_with_a_changed_rules_file_is_refused_before_it_starts(inputs, tmp_path):
    rules, _, _, release = inputs
    settings = settings_of(tmp_path, rules)
    refuse_changed_version(settings, "deflectionbench", "1.0.0")  # the same settings and inputs: a rerun may go on
    rules.write_text('{"when_all": ["Question:"], "answer": "Lyon"}\n')
    with pytest.raises(ReleaseExists, match=r"input models\.reader\.script: content"):
        refuse_changed_version(settings, "deflectionbench", "1.0.0")


def _written_before(release, section: str, key: str):
    """``release`` as a version of mmcurate before ``section.key`` existed would have written it."""
    opened = open_release(release)
    config = {**opened.manifest.config}
    config["deflectionbench"] = {**config["deflectionbench"]}
    config["deflectionbench"][section] = {k: v for k, v in config["deflectionbench"][section].items() if k != key}
    return replace(opened, manifest=opened.manifest.model_copy(update={"config": config}))


def test_a_setting_added_since_the_release_is_read_at_its_default(inputs, tmp_path):
    """A release written before ``topics.fit_sample`` existed is the rerun of the same config
    today (the setting at its default); a run setting it otherwise is another release."""
    _, _, draft, release = inputs
    older = _written_before(release, "topics", "fit_sample")
    assert "fit_sample" not in older.manifest.config["deflectionbench"]["topics"]
    assert draft_differences(older, draft) == []
    settings = Settings(
        **{
            **draft.config,
            "deflectionbench": {
                **draft.config["deflectionbench"],
                "topics": {**draft.config["deflectionbench"]["topics"], "fit_sample": 500},
            },
        }
    )
    other = replace(draft, config=settings.resolved())
    assert draft_differences(older, other) == ["deflectionbench.topics.fit_sample: null -> 500"]
