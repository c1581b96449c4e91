"""The manifest as a typed, versioned model: read through ``load_manifest``, its JSON Schema
sealed into every release and checked by ``verify``; releases of the previous format still read.

``data/format2/deflectionbench/1.0.0`` is a release as mmcurate wrote it before the model
(commit 3dced4f: manifest format 2, no schema file): the sealed files of the session's
DeflectionBench test release (``release_builders.deflection_draft``), its post-seal files left out.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.manifest import MANIFEST, load_manifest
from mmcurate.releases.manifest_model import MANIFEST_FORMAT, SCHEMA_FILE, Manifest, schema_text
from mmcurate.releases.reader import open_release
from mmcurate.releases.verify import verify_release
from tests.releases.release_builders import reseal

FORMAT2 = Path(__file__).parent / "data" / "format2" / "deflectionbench" / "1.0.0"


@pytest.fixture
def old(tmp_path) -> Path:
    target = tmp_path / "releases" / "deflectionbench" / "1.0.0"
    shutil.copytree(FORMAT2, target)
    return target


def test_a_release_of_the_previous_format_reads_typed_and_verifies(old):
    manifest = load_manifest(old)
    assert isinstance(manifest, Manifest) and manifest.format == 2
    assert (manifest.benchmark, manifest.version, manifest.parent) == ("deflectionbench", "1.0.0", None)
    assert manifest.counts.rows == {"test": 6} and manifest.counts.per_source == {"infoseek": 3, "webqa": 3}
    assert [m.name for m in manifest.models] == ["smollm2"] and manifest.models[0].role == "gating"
    assert manifest.models[0].identity() == {
        "name": "smollm2",
        "backend": "embedded",
        "model": "smollm2",
        "revision": "q8",
        "vision": False,
    }
    assert manifest.judge_name == "lexical" and manifest.components["entailment"] == "lexical-overlap-v1"
    assert manifest.seed == 7 and manifest.k_min == 3 and manifest.config["deflectionbench"]["k_min"] == 3
    assert set(manifest.files) >= {"README.md", "ledger.parquet", *manifest.shards["test"]}
    assert manifest.recorded() == json.loads((old / MANIFEST).read_text())  # nothing lost, nothing added
    release = open_release(old)
    assert release.content_id == manifest.sealed and release.configs == ["test"]
    assert release.table("test").num_rows == 6
    result = verify_release(old)
    assert result.ok, result.problems()
    assert result.notes == [
        f"{MANIFEST} is format 2: written before releases carried the manifest's schema ({SCHEMA_FILE})"
    ]


def test_a_new_release_seals_its_schema_and_verify_checks_it(copy):
    manifest = json.loads((copy / MANIFEST).read_text())
    assert manifest["format"] == MANIFEST_FORMAT == 3
    assert (copy / SCHEMA_FILE).read_text() == schema_text() and SCHEMA_FILE in manifest["files"]
    assert json.loads(schema_text())["title"] == "mmcurate release manifest, format 3"
    result = verify_release(copy)
    assert result.ok and result.notes == [], result.problems()


def test_verify_holds_the_manifest_to_the_schema_sealed_beside_it(copy):
    """A manifest checked against its own release's schema (sealed, so not edited unnoticed): a
    schema that asks for what the manifest lacks fails verification, naming the entry."""
    schema = json.loads((copy / SCHEMA_FILE).read_text())
    schema["required"] = [*schema["required"], "licence"]
    (copy / SCHEMA_FILE).write_text(json.dumps(schema))
    reseal(copy, json.loads((copy / MANIFEST).read_text()))
    result = verify_release(copy)
    assert result.invalid == [f"{MANIFEST} does not follow {SCHEMA_FILE}: (top): 'licence' is a required property"]


def test_a_format_3_release_without_its_schema_fails_verification(copy):
    manifest = json.loads((copy / MANIFEST).read_text())
    (copy / SCHEMA_FILE).unlink()
    reseal(copy, {**manifest, "files": {k: v for k, v in manifest["files"].items() if k != SCHEMA_FILE}})
    result = verify_release(copy)
    assert result.invalid == [f"{MANIFEST} is format 3: its schema {SCHEMA_FILE} is not a sealed file"]


def test_a_manifest_of_the_wrong_shape_is_one_line_naming_the_entry(copy):
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["counts"]["rows"] = {"test": "many"}
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ReleaseError) as refused:
        load_manifest(copy)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(f"{copy / MANIFEST} is not a release manifest: counts.rows.test: ")
