"""The DeflectionBench prompt templates: built in after the paper, or from a YAML file of templates
named in the config (``deflectionbench.prompts``), read and checked when the config loads."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest
import yaml

from mmcurate.core.config import Settings, load_config
from mmcurate.core.errors import ConfigError, MmcurateError
from mmcurate.evaluation.deflectionbench.scenarios import evaluate, scenario_request
from mmcurate.gating import prompts

CONFIG = """
models:
  a: {backend: scripted, script: rules.jsonl, default: "no idea"}
deflectionbench:
  sources: [{name: webqa, root: data/webqa}]
  gating: {pool: [a]}
  prompts: %s
"""
SEVERE = "Only answer if you are sure; otherwise write I cannot answer this question. Answer:"


def config(tmp_path: Path, templates: object, where: str = "templates/paper.yaml") -> Path:
    file = tmp_path / where
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(templates if isinstance(templates, str) else yaml.safe_dump(templates))
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(CONFIG % where))
    return path


def test_every_template_name_has_a_built_in_text():
    assert set(prompts.BUILT_IN_TEXTS) == set(prompts.TEMPLATE_NAMES)
    assert prompts.prompt_set(None) is prompts.BUILT_IN
    # the forced-guess wording is exactly the one releases were made with before it became a switch
    assert prompts.BUILT_IN.parametric(force_guess=True).system == (
        "You answer questions about images. Reply with the answer only: a name, a number, a date or a short "
        "phrase, with no explanation. If you are not sure, still give your single best guess."
    )
    assert "guess" not in prompts.BUILT_IN.parametric().system and "guess" not in prompts.BUILT_IN.evidence().system


def test_a_template_file_replaces_the_texts_it_names(tmp_path):
    path = config(tmp_path, {"abstention_severe": SEVERE, "parametric": "Name what is asked."})
    cfg = load_config(path)
    spec = cfg.deflectionbench.prompts
    file = (tmp_path / "templates/paper.yaml").resolve()
    assert spec.file == file and spec.sha256 == hashlib.sha256(file.read_bytes()).hexdigest()
    templates = prompts.prompt_set(spec)
    assert templates.source == f"paper.yaml (sha256 {spec.sha256})"
    severe, moderate = templates.evaluation("severe"), templates.evaluation("moderate")
    assert severe.instruction == SEVERE and severe.id.startswith("eval.severe.custom-")
    assert moderate == prompts.eval_template("moderate")  # a text the file leaves out stays built in
    assert templates.parametric().system == "Name what is asked." and templates.parametric().id.startswith(
        "gate.parametric.custom-"
    )
    assert templates.evidence() == prompts.WITH_EVIDENCE
    assert templates.parametric(force_guess=True).system == (
        f"Name what is asked. {prompts.BUILT_IN_TEXTS['best_guess']}"
    )
    row = {"sample_id": "s", "question": "Q?", "images": [], "gold_contexts": [], "negative_contexts": []}
    request = scenario_request(row, "parametric", abstention="severe", templates=templates)
    assert request.template == severe.id and request.messages[1]["content"][-1]["text"] == SEVERE
    assert templates.describe([severe.id]) == f"prompt templates from paper.yaml (sha256 {spec.sha256}): {severe.id}"


def test_the_resolved_config_keeps_the_wording_without_the_file(tmp_path):
    cfg = load_config(config(tmp_path, {"abstention_severe": SEVERE}))
    recorded = cfg.resolved()
    assert recorded["deflectionbench"]["prompts"]["templates"] == {"abstention_severe": SEVERE}
    (tmp_path / "templates/paper.yaml").unlink()  # another machine, months later
    again = Settings.from_resolved(recorded, tmp_path)
    assert prompts.prompt_set(again.deflectionbench.prompts).evaluation("severe").instruction == SEVERE


@pytest.mark.parametrize(
    "templates, message",
    [
        ({"abstention_extreme": "x"}, r"abstention_extreme"),
        ({"abstention_soft": "  "}, r"empty prompt template \['abstention_soft'\]"),
        ("- a list\n- of lines\n", "expected a mapping of template names to text"),
        ("soft: [unclosed\n", "is not valid YAML"),
    ],
)
def test_bad_template_files_are_one_line_config_errors(tmp_path, templates, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(config(tmp_path, templates))
    assert "\n" not in str(err.value) and "deflectionbench.prompts" in str(err.value)


def test_a_missing_template_file_is_a_config_error(tmp_path):
    path = config(tmp_path, {"abstention_soft": "x"})
    (tmp_path / "templates/paper.yaml").unlink()
    with pytest.raises(ConfigError, match=r"deflectionbench\.prompts: prompt templates .*paper\.yaml: No such file"):
        load_config(path)


def test_verify_first_refuses_evaluation_templates_it_would_not_use(world, make, tmp_path):
    templates = prompts.prompt_set(
        load_config(config(tmp_path, {"abstention_moderate": "Answer now:"})).deflectionbench.prompts
    )
    m = world.add("m", [], default="Paris")
    sample = make.sample("s", "Q?", ["Paris"])
    with pytest.raises(MmcurateError, match="answers with the built-in prompt templates"):
        evaluate(
            make.table([sample]),
            world.pool,
            world.judge,
            m,
            ["oracle"],
            2,
            "moderate",
            0,
            "e",
            system="verify-first",
            templates=templates,
        )
    plain = evaluate(
        make.table([sample]), world.pool, world.judge, m, ["oracle"], 2, "moderate", 0, "e", templates=templates
    )
    assert plain.num_rows == 1 and world.pool.messages[m][0][1]["content"][-1]["text"] == "Answer now:"
