"""Re-curation roles and the models given them (issue 42 item 14): a ReflectV re-checking
verifier looks at the marked images, so a model without vision is refused for it, before any
work, with one line; a teacher (scored against the ground truth) may be text-only."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.releases.recuration import recuration_settings
from tests.flows import flowkit

MODELS = {
    "smollm2-warm": {"backend": "scripted", "script": "warm.jsonl", "revision": "warm-1"},  # vision: false
    "seer": {"backend": "scripted", "script": "warm.jsonl", "vision": True, "revision": "seer-1"},
}


@pytest.fixture
def config(tmp_path: Path, fixtures_root: Path) -> Path:
    (tmp_path / "warm.jsonl").write_text("")
    return flowkit.reflectv_config(tmp_path, fixtures_root, models=MODELS)


def test_a_verifier_without_vision_is_refused(config: Path) -> None:
    parent = SimpleNamespace(benchmark="reflectv")  # with --config, only the parent's benchmark is read
    with pytest.raises(ConfigError) as refused:
        recuration_settings(parent, config, ["verifier=smollm2-warm"])
    assert str(refused.value) == (
        "--add-model: reflectv verifier 'smollm2-warm' does not see images (vision: false): "
        "a re-checking verifier must see the marks it checks; name a vision model"
    )
    settings, added = recuration_settings(parent, config, ["verifier=seer", "teacher=smollm2-warm"])
    assert added == {"verifier": ["seer"], "teacher": ["smollm2-warm"]}
    assert settings.reflectv.recheck_verifiers == ["seer"]


def test_a_config_naming_a_blind_recheck_verifier_is_refused_at_load(tmp_path: Path, fixtures_root: Path) -> None:
    (tmp_path / "warm.jsonl").write_text("")
    path = flowkit.reflectv_config(tmp_path, fixtures_root, models=MODELS)
    data = yaml.safe_load(path.read_text())
    data["reflectv"]["recheck_verifiers"] = ["smollm2-warm"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="reflectv verifier 'smollm2-warm' does not see images"):
        load_config(path)
