"""The ReflectV config section: the paper's settings load, specs parse, bad values fail at load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.specs import Boxes, Heuristic, ModelRef, Pointing, Saliency, Sam2, Template

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
BASE = """
models:
  vlm: {backend: scripted, script: rules.jsonl, vision: true}
  llm: {backend: scripted, script: rules.jsonl}
reflectv:
  sources: [{name: gqa, root: data/gqa}]
  student: vlm
  teacher: vlm
  rewriter: llm
  verifier: vlm
  grounding: boxes:regions
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_paper_settings_load() -> None:
    paper = load_config(CONFIGS / "reflectv-paper.yaml")
    cfg = paper.reflectv
    assert paper.model(cfg.student).model.startswith("gpt-4o") and paper.model(cfg.teacher).vision
    assert paper.model(cfg.student).api_key_env == "OPENAI_API_KEY"
    assert paper.model(cfg.rewriter).model == "Qwen/Qwen2.5-7B-Instruct" and cfg.keywords == ModelRef(name="qwen2.5-7b")
    assert cfg.grounding == Pointing(model="molmo-7b") and paper.model("molmo-7b").model == "allenai/Molmo-7B-D-0924"
    assert isinstance(cfg.segmenter, Sam2) and cfg.segmenter.checkpoint.name == "sam2.1_hiera_large.pt"
    assert paper.model(cfg.verifier).model == "Qwen/Qwen2.5-VL-7B-Instruct" and cfg.rho == 0.75
    assert paper.judge.kind == "llm" and {s.name for s in cfg.sources} == {
        "gqa",
        "textvqa",
        "docvqa",
        "chartqa",
        "fire",
    }
    assert cfg.captions == ModelRef(name="qwen2.5-7b") and ("captions", "qwen2.5-7b") in paper.roles("reflectv")
    assert cfg.collapse_revealing_feedback is False


def test_demo_section_loads() -> None:
    demo = load_config(CONFIGS / "demo.yaml").reflectv
    assert isinstance(demo.grounding, Boxes) and demo.grounding.path.is_absolute()
    assert demo.keywords == Heuristic() and demo.rewriter == "smollm2-rewriter" and demo.max_turns == 3


def test_specs_short_forms_and_relative_paths(tmp_path) -> None:
    cfg = load_config(_write(tmp_path, BASE)).reflectv
    assert cfg.grounding == Boxes(path=(tmp_path / "regions").resolve()) and str(cfg.grounding).startswith("boxes:")
    cfg = load_config(
        _write(tmp_path, BASE.replace("boxes:regions", "saliency") + "  segmenter: sam2:cfg.yaml:w/sam.pt\n")
    ).reflectv
    assert cfg.grounding == Saliency() and cfg.segmenter.checkpoint == (tmp_path / "w/sam.pt").resolve()
    assert cfg.colors[0] == "red" and len(cfg.mark_types) == 7
    assert cfg.captions == Template() and str(cfg.captions) == "template"
    cfg = load_config(_write(tmp_path, BASE + "  captions: llm\n  collapse_revealing_feedback: true\n")).reflectv
    assert cfg.captions == ModelRef(name="llm") and cfg.collapse_revealing_feedback is True


@pytest.mark.parametrize(
    "change, message",
    [
        (("rewriter: llm", "rewriter: gone"), "unknown model ['gone']"),
        (("grounding: boxes:regions", "grounding: pointing:molmo"), "unknown model ['molmo']"),
        (("  teacher: vlm\n", ""), "both student and teacher, or neither"),
        (("grounding: boxes:regions", "grounding: sonar"), "grounding"),
        (
            ("grounding: boxes:regions", "grounding: boxes:regions\n  segmenter: sam2:only-config"),
            "sam2 spec must look like",
        ),
        (("grounding: boxes:regions", "grounding: boxes:regions\n  rho: 1.5"), "reflectv.rho"),
        (("grounding: boxes:regions", "grounding: boxes:regions\n  colors: [crimson]"), "reflectv.colors"),
        (("grounding: boxes:regions", "grounding: boxes:regions\n  captions: writer"), "unknown model ['writer']"),
        (
            ("grounding: boxes:regions", "grounding: boxes:regions\n  collapse_revealing_feedback: maybe"),
            "reflectv.collapse_revealing_feedback",
        ),
    ],
)
def test_bad_values_fail_at_load(tmp_path, change, message) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(_write(tmp_path, BASE.replace(*change)))
    assert message in str(error.value) and "\n" not in str(error.value)
