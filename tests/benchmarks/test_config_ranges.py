"""Every number a config can set has its range checked at load: each numeric field of the
settings (core's and every registered benchmark's sections, nested models included) carries
a bound, or a validator of its own; and a value out of range is one line naming its path."""

from __future__ import annotations

import typing

import annotated_types
import pytest
from pydantic import BaseModel

import mmcurate.benchmarks  # noqa: F401  registers the sections
from mmcurate.core import config
from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError

BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt, annotated_types.Interval)


def _models(annotation: object) -> list[type[BaseModel]]:
    found, stack = [], [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, BaseModel):
            found.append(current)
        stack += typing.get_args(current)
    return found


def _numbers(annotation: object) -> bool:
    stack = [annotation]
    while stack:
        current = stack.pop()
        if current in (int, float):
            return True
        stack += typing.get_args(current)
    return False


def _unbounded() -> list[str]:
    out: list[str] = []
    seen: set[type[BaseModel]] = set()
    stack: list[tuple[type[BaseModel], str]] = [(config.Settings, "settings")]
    while stack:
        model, path = stack.pop()
        if model in seen:
            continue
        seen.add(model)
        validated = {
            field
            for decorator in model.__pydantic_decorators__.field_validators.values()
            for field in decorator.info.fields
        }
        for name, field in model.model_fields.items():
            bounded = any(isinstance(m, BOUNDS) for m in field.metadata) or name in validated
            if _numbers(field.annotation) and not bounded:
                out.append(f"{path}.{name}")
            stack += [(sub, f"{path}.{name}") for sub in _models(field.annotation)]
    return sorted(out)


def test_every_numeric_setting_has_a_range():
    assert _unbounded() == []


@pytest.mark.parametrize("section", ["pope", "cragmm"])
def test_a_negative_seed_is_one_line_naming_its_path(tmp_path, section):
    (tmp_path / "raw").mkdir()
    path = tmp_path / "config.yaml"
    path.write_text(f"{section}:\n  sources: [{{name: {section}, root: raw}}]\n  seed: -1\n")
    with pytest.raises(ConfigError, match=rf"{section}\.seed: Input should be greater than or equal to 0"):
        load_config(path)
