"""The Settings type is built from the registered sections (core.config.settings_type) and
behaves as a class declared in the module: it pickles by name (Dask and Ray ship settings to
their workers), and each registered section is an optional field."""
from __future__ import annotations

import pickle

from mmcurate.benchmarks import BENCHMARKS
from mmcurate.core.config import Settings, load_config, settings_type


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
            assert fields["evaluation"].annotation.model_fields[benchmark.name].annotation is benchmark.evaluation_config
