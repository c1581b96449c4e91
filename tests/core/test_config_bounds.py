"""Issue 42 items 5, 6 and 22: YAML bounded by size and alias expansion, model names that are
one safe folder name, and a model file that is no mapping: each one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mmcurate.core.config import MAX_YAML_BYTES, MAX_YAML_VALUES, ModelSpec, Settings, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.evaluation.runs import evaluation_folder

BASE = """
workdir: work
models:
  a: {backend: scripted, script: rules.jsonl, default: "no idea"}
"""


def _bomb(levels: int, width: int = 10) -> str:
    """``engine_args`` whose aliases expand to ``width ** levels`` values (a billion laughs)."""
    lines = ["    l0: &l0 lol"]
    lines += [f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def _one_line(caught: pytest.ExceptionInfo, *needles: str) -> None:
    message = str(caught.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)


def test_an_alias_bomb_in_engine_args_is_one_line(tmp_path: Path) -> None:
    """Item 5: nine levels of ten aliases took 88 s and 3.4 GB, then a MemoryError traceback.
    Six levels (10^6 values) loaded, slowly, before the bound; now they are refused in one line."""
    config = tmp_path / "cfg.yaml"
    config.write_text(
        BASE
        + "  v:\n    backend: vllm\n    model: org/m\n    engine_args:\n"
        + _bomb(6).replace("    l", "      l")
        + "\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    _one_line(caught, f"config {config}: ", f"more than {MAX_YAML_VALUES:,} values")
    nine = tmp_path / "nine.yaml"
    nine.write_text(
        BASE
        + "  v:\n    backend: vllm\n    model: org/m\n    engine_args:\n"
        + _bomb(9).replace("    l", "      l")
        + "\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(nine)
    _one_line(caught, "alias bomb")


def test_a_model_file_and_a_catalog_are_bounded_too(tmp_path: Path) -> None:
    from mmcurate.models.catalog import read_catalog

    settings = load_config(_write(tmp_path, BASE))
    model = tmp_path / "bomb.yaml"
    model.write_text("name: v\nbackend: vllm\nmodel: org/m\nengine_args:\n" + _bomb(6) + "\n")
    with pytest.raises(ConfigError) as caught:
        settings.add_model(str(model))
    _one_line(caught, f"model file {model}: ", "alias bomb")
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "models:\n  - name: v\n    backend: vllm\n    model: org/m\n    engine_args:\n"
        + _bomb(6).replace("    l", "      l")
        + "\n"
    )
    with pytest.raises(ConfigError) as caught:
        read_catalog(catalog)
    _one_line(caught, f"catalog {catalog}: ", "alias bomb")


def test_an_alias_that_contains_itself_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text(BASE + "  v:\n    backend: vllm\n    model: org/m\n    engine_args: &loop {self: *loop}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    _one_line(caught, "refers to a node that contains it")


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    config = tmp_path / "huge.yaml"
    with config.open("wb") as out:
        out.truncate(MAX_YAML_BYTES + 1)  # sparse: no 16 MB written
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    _one_line(caught, f"config {config}: larger than 16 MB")


def test_aliases_of_a_real_config_still_load(tmp_path: Path) -> None:
    config = _write(
        tmp_path, BASE + "  b: &shared {backend: scripted, script: rules.jsonl, default: x}\n  c: *shared\n"
    )
    assert load_config(config).model("c").default == "x"


@pytest.mark.parametrize(
    "name", ["../../../sec/EVILNAME", "org/model", "..", ".hidden", "-flag", "a b", "", "x" * 129, "a\\b"]
)
def test_a_model_name_is_one_safe_folder_name(tmp_path: Path, name: str) -> None:
    """Item 6: a model named ``../../../sec/EVILNAME`` made evaluate write outside the workdir."""
    with pytest.raises(ValueError, match="is not one folder name"):
        ModelSpec(name=name, backend="scripted", script=tmp_path / "r.jsonl")
    config = tmp_path / "cfg.yaml"
    config.write_text(BASE + f"  {name!r}: {{backend: scripted, script: rules.jsonl}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    _one_line(caught, "is not one folder name", "goes in 'model'")


def test_a_model_file_named_out_of_the_workdir_is_refused(tmp_path: Path) -> None:
    settings = load_config(_write(tmp_path, BASE))
    model = tmp_path / "evil.yaml"
    model.write_text("name: ../../../sec/EVILNAME\nbackend: scripted\nscript: rules.jsonl\n")
    with pytest.raises(ConfigError) as caught:
        settings.add_model(str(model))
    _one_line(caught, f"model file {model}: name: ", "is not one folder name")


def test_an_org_model_id_is_the_model_not_the_name(tmp_path: Path) -> None:
    """``org/model`` stays usable as the endpoint's model id; the evaluation folder is the name's."""
    settings = Settings(
        workdir=tmp_path / "work",
        models={
            "qwen2.5-vl-7b": {"backend": "openai", "model": "Qwen/Qwen2.5-VL-7B-Instruct", "base_url": "http://h:1/v1"}
        },
    )
    spec = settings.model("qwen2.5-vl-7b")
    assert spec.model == "Qwen/Qwen2.5-VL-7B-Instruct"
    folder = evaluation_folder(settings, "deflectionbench", "1.0.0", spec.name, None)
    assert folder.parent.parent == tmp_path / "work" / "evaluations" and folder.name == "qwen2.5-vl-7b"


def test_a_served_model_id_becomes_a_safe_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server's model list names its models by id (``org/model``): the name is mapped, the id kept."""
    import httpx

    from mmcurate.models import catalog

    answer = {"object": "list", "data": [{"id": "Qwen/Qwen2.5-VL-7B-Instruct"}, {"id": "../../etc"}]}
    monkeypatch.setattr(
        catalog.httpx, "get", lambda url, timeout: httpx.Response(200, json=answer, request=httpx.Request("GET", url))
    )
    models = catalog.read_catalog("http://127.0.0.1:9/v1")
    assert [(m.spec.name, m.spec.model) for m in models] == [
        ("Qwen_Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"),
        ("etc", "../../etc"),
    ]


@pytest.mark.parametrize(
    "text, said", [("", "got an empty file"), ("- a\n- b\n", "got a list"), ("just words\n", "got a str")]
)
def test_a_model_file_that_is_no_mapping_is_one_clear_line(tmp_path: Path, text: str, said: str) -> None:
    """Item 22: an empty model file said "ModelSpec() argument after ** must be a mapping"."""
    settings = load_config(_write(tmp_path, BASE))
    model = tmp_path / "model.yaml"
    model.write_text(text)
    with pytest.raises(ConfigError) as caught:
        settings.add_model(str(model))
    _one_line(caught, f"model file {model}: expected a mapping of model fields (name, backend, ...), {said}")
    assert "ModelSpec()" not in str(caught.value)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(text))
    return path
