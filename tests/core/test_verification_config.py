"""Config of the verification components: the RefLVQA cutoff and sentence verification, a
model's tokenizer; one-line errors with the field's path."""

from __future__ import annotations

import textwrap

import pytest

from mmcurate.core.config import Settings, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.specs import Heuristic, MadCutoff, ModelRef, TopK

BASE = """
models:
  v: {backend: scripted, script: rules.jsonl, default: "{}", tokenizer: tok/tokenizer.json}
reflvqa:
  source: {name: reddit, root: dumps}
"""


def load(tmp_path, extra):
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(BASE) + extra)
    return load_config(path)


def test_cutoff_and_verification_load_and_round_trip(tmp_path):
    cfg = load(
        tmp_path,
        "  cutoff: {kind: mad, tau: 0.1, lambda: 1.5, max_keep: 3}\n"
        "  verification:\n    verifier: v\n    gate: {thresholds: {count: 0.88}, max_rounds: 2}\n",
    )
    r = cfg.reflvqa
    assert r.cutoff == MadCutoff() and r.verification.claims == Heuristic()
    assert r.verification.gate.thresholds["count"] == 0.88 and r.verification.gate.max_rounds == 2
    assert cfg.model("v").tokenizer == (tmp_path / "tok/tokenizer.json").resolve()
    dumped = cfg.resolved()
    assert dumped["reflvqa"]["cutoff"] == "mad" and dumped["reflvqa"]["verification"]["claims"] == "heuristic"
    assert Settings(**dumped).reflvqa == r
    short = load(tmp_path, "  cutoff: top_k:4\n  verification: {verifier: v, claims: v}\n")
    assert short.reflvqa.cutoff == TopK(k=4) and short.reflvqa.verification.claims == ModelRef(name="v")
    assert load(tmp_path, "").reflvqa.cutoff is None and load(tmp_path, "").reflvqa.verification is None


@pytest.mark.parametrize(
    "extra, message",
    [
        ("  cutoff: median\n", "reflvqa.cutoff"),
        ("  cutoff: {kind: mad, lambda: -1}\n", "reflvqa.cutoff"),
        ("  verification: {verifier: nobody}\n", "unknown model ['nobody']"),
        ("  verification: {verifier: v, claims: ghost}\n", "unknown model ['ghost']"),
        ("  verification: {verifier: v, gate: {thresholds: {count: 0.95}}}\n", "0.82, 0.9"),
        ("  verification: {verifier: v, gate: {thresholds: {shape: 0.85}}}\n", "reflvqa.verification.gate.thresholds"),
    ],
)
def test_bad_values_are_one_line_errors(tmp_path, extra, message):
    with pytest.raises(
        ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    ) as err:
        load(tmp_path, extra)
    assert "\n" not in str(err.value)
