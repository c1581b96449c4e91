"""The Settings type is built from the registered sections (core.config.settings_type) and
behaves as a class declared in the module: it pickles by name (Dask and Ray ship settings to
their workers), and each registered section is an optional field."""

from __future__ import annotations

import pickle
import re
import tomllib
from pathlib import Path

import pytest

from mmcurate.benchmarks import BENCHMARKS
from mmcurate.core.config import Section, Settings, load_config, settings_type
from mmcurate.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_settings_pickle_by_name(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("workdir: w\nevaluation: {reflvqa: {top_k: 3}}\n")
    settings = load_config(config)
    again = pickle.loads(pickle.dumps(settings))
    assert again == settings and again.evaluation.reflvqa.top_k == 3
    assert type(again) is Settings is settings_type()


def test_every_registered_section_is_an_optional_field():
    fields = settings_type().model_fields
    for benchmark in BENCHMARKS.values():
        for name in (benchmark.name, *benchmark.sections):
            assert fields[name].default is None
        if benchmark.evaluation_config is not None:
            assert (
                fields["evaluation"].annotation.model_fields[benchmark.name].annotation is benchmark.evaluation_config
            )


def test_a_section_reads_as_its_own_type(tmp_path):
    """``<Section>.of(settings)``: the section typed as its class (``settings.<name>`` is untyped:
    ``Settings`` is built at run time); ``find`` is None and ``of`` a one-line ConfigError when
    the config leaves a top-level section out."""
    from mmcurate.benchmarks.cragmm import CruiseConfig
    from mmcurate.benchmarks.deflectionbench import DeflectionBenchConfig, VerifyFirstConfig
    from mmcurate.benchmarks.reflvqa import RefLVQAEvalConfig

    config = tmp_path / "c.yaml"
    config.write_text(
        "workdir: w\nmodels: {a: {backend: scripted, script: r.jsonl}}\n"
        "deflectionbench: {sources: [{name: webqa, root: d}], gating: {pool: [a]}}\n"
        "evaluation: {reflvqa: {top_k: 3}}\n"
    )
    settings = load_config(config)
    assert DeflectionBenchConfig.of(settings) is settings.deflectionbench
    assert RefLVQAEvalConfig.of(settings).top_k == 3
    assert VerifyFirstConfig.of(settings) is settings.evaluation.verify_first  # a default section
    assert CruiseConfig.find(settings) is None
    with pytest.raises(ConfigError, match=r"^the config has no 'cruise' section$"):
        CruiseConfig.of(settings)
    with pytest.raises(ConfigError, match="is not a registered config section"):
        Section.of(settings)


def test_no_code_reads_a_registered_section_untyped():
    """Library code reads a benchmark's section through its class (``<Section>.of``), never as
    ``settings.<name>`` or ``settings.evaluation.<name>``, which type checkers cannot follow."""
    names = {
        name
        for benchmark in BENCHMARKS.values()
        for name in (benchmark.name, *benchmark.sections, *benchmark.evaluation_sections)
    }
    read = re.compile(rf"\b(?:settings|conf)\.(?:evaluation|{'|'.join(sorted(names))})\b")
    folders = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for folder in sorted(folders)
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if read.search(line)
    ]
    assert found == []
