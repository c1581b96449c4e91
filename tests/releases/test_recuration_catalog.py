"""``--add-model CATALOG#NAME``: a re-curation takes a model of the maintainers' catalog by name,
so a model listed there is written there only (``make demo`` re-curates with
``configs/catalog.yaml#smollm2-warm``): the catalog's spec (its paths against the catalog's
folder) in the role the catalog gives it unless ``ROLE=`` says another; a missing name, a
config model of that name with another spec and a role the benchmark does not take are one line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.models.catalog import read_catalog
from mmcurate.releases import recuration
from mmcurate.releases.recuration import recuration_settings
from tests.flows import flowkit

MODELS = {"seer": {"backend": "scripted", "script": "warm.jsonl", "vision": True, "revision": "seer-1"}}
PARENT = SimpleNamespace(benchmark="reflectv")  # with --config, only the parent's benchmark is read


@pytest.fixture
def config(tmp_path: Path, fixtures_root: Path) -> Path:
    (tmp_path / "warm.jsonl").write_text("")
    return flowkit.reflectv_config(tmp_path, fixtures_root, models=MODELS)


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    home = tmp_path / "catalogs"
    home.mkdir()
    (home / "tutor.jsonl").write_text("")
    path = home / "catalog.yaml"
    path.write_text(
        """models:
  - {name: tutor, backend: scripted, script: tutor.jsonl, revision: tutor-1, role: teacher, released: 2026-11-01}
  - {name: watcher, backend: scripted, script: tutor.jsonl, revision: w-1, vision: true, released: 2026-11-02}
  - {name: seer, backend: scripted, script: tutor.jsonl, revision: seer-2, vision: true, released: 2026-11-03}
  - {name: gater, backend: scripted, script: tutor.jsonl, revision: g-1, role: gating, released: 2026-11-04}
"""
    )
    return path


def test_a_catalog_model_comes_in_the_role_the_catalog_gives_it(config: Path, catalog: Path, monkeypatch) -> None:
    reads: list[str] = []
    monkeypatch.setattr(recuration, "read_catalog", lambda source: reads.append(source) or read_catalog(source))
    settings, added = recuration_settings(PARENT, config, [f"{catalog}#tutor", f"{catalog}#watcher"])
    assert reads == [str(catalog)]  # read once for both of its models (a server's list: one request)
    assert added == {"teacher": ["tutor"], "verifier": ["watcher"]}  # watcher: no role listed, the default
    tutor = settings.models["tutor"]
    assert (tutor.revision, tutor.script) == ("tutor-1", catalog.parent / "tutor.jsonl")  # against the catalog's folder
    assert settings.reflectv.recheck_verifiers == ["watcher"]


def test_role_equals_overrides_the_catalog_role(config: Path, catalog: Path) -> None:
    settings, added = recuration_settings(PARENT, config, [f"verifier={catalog}#watcher", f"teacher={catalog}#watcher"])
    assert added == {"verifier": ["watcher"], "teacher": ["watcher"]}


def test_a_name_the_catalog_lacks_is_one_line_naming_what_it_has(config: Path, catalog: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        recuration_settings(PARENT, config, [f"{catalog}#tutr"])
    assert str(refused.value) == (
        f"--add-model {catalog}#tutr: catalog {catalog} has no model 'tutr' (it has tutor, watcher, seer, gater)"
    )


def test_a_catalog_model_redefining_a_config_model_is_refused(config: Path, catalog: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        recuration_settings(PARENT, config, [f"{catalog}#seer"])
    assert str(refused.value) == f"catalog {catalog}: models[2] (seer) redefines model 'seer'"


def test_a_catalog_role_the_benchmark_does_not_take_is_refused(config: Path, catalog: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        recuration_settings(PARENT, config, [f"{catalog}#gater"])
    assert str(refused.value) == (
        f"catalog {catalog}: models[3] (gater): role 'gating' is not one of reflectv's re-curation roles "
        "(verifier, teacher)"
    )


def test_a_missing_catalog_file_is_one_line(config: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        recuration_settings(PARENT, config, [f"{tmp_path}/none.yaml#tutor"])
    assert str(refused.value).startswith(f"catalog {tmp_path}/none.yaml: no such file")


def test_a_model_file_whose_name_holds_the_mark_is_a_model_file(config: Path, tmp_path: Path) -> None:
    (tmp_path / "v#2.yaml").write_text("{name: sharp, backend: scripted, script: warm.jsonl, revision: s-1}\n")
    settings, added = recuration_settings(PARENT, config, [f"teacher={tmp_path}/v#2.yaml"])
    assert added == {"teacher": ["sharp"]} and settings.models["sharp"].revision == "s-1"


@pytest.mark.parametrize("spec", ["#tutor", "CATALOG#"])
def test_a_catalog_mark_without_a_catalog_or_a_name_is_one_line(config: Path, catalog: Path, spec: str) -> None:
    spec = spec.replace("CATALOG", str(catalog))
    with pytest.raises(ConfigError) as refused:
        recuration_settings(PARENT, config, [spec])
    assert str(refused.value) == (
        f"--add-model {spec}: CATALOG#NAME takes a catalog (a YAML file or a server) and a model name"
    )
