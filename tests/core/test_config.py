import textwrap

import pytest

from mmcurate.core.config import Settings, bundled_config, load_config
from mmcurate.core.errors import ConfigError
from mmcurate.core.specs import NLI, Contriever, Descriptor, KBPath, Lexical, MiniLM, OpenClip, WikiOffline

BASE = """
workdir: work
models:
  a: {backend: scripted, script: rules.jsonl, default: "no idea"}
  b: {backend: openai, model: gpt-4o, api_key_env: OPENAI_API_KEY}
deflectionbench:
  sources: [{name: webqa, root: data/webqa}]
  gating: {pool: [a, b]}
"""


def _write(tmp_path, text):
    path = tmp_path / "cfg.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_defaults_names_and_relative_paths(tmp_path):
    cfg = load_config(_write(tmp_path, BASE))
    assert cfg.workdir == (tmp_path / "work").resolve()
    assert cfg.deflectionbench.sources[0].root == (tmp_path / "data/webqa").resolve()
    a = cfg.model("a")
    assert a.name == "a" and a.script == (tmp_path / "rules.jsonl").resolve()
    b = cfg.model("b")
    # the paper's sampling defaults
    assert (b.temperature, b.top_p, b.repetition_penalty) == (0.2, 1.0, 1.05)
    assert cfg.deflectionbench.k_min == 5 and cfg.deflectionbench.gating.rule == "all_incorrect"


def test_environment_overrides_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCURATE_DEFLECTIONBENCH__K_MIN", "3")
    cfg = load_config(_write(tmp_path, BASE))
    assert cfg.deflectionbench.k_min == 3
    assert cfg.deflectionbench.gating.pool == ["a", "b"]


def test_unknown_model_reference_is_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, BASE.replace("pool: [a, b]", "pool: [a, c]")))
    assert "unknown model ['c']" in str(err.value) and "\n" not in str(err.value)


def test_unknown_key_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="k_mn"):
        load_config(_write(tmp_path, BASE + "  k_mn: 4\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_an_unknown_bundled_config_names_the_bundled_ones():
    with pytest.raises(ConfigError, match=r"no bundled config 'demo\.yml'; bundled: .*demo\.yaml, dryrun\.yaml"):
        bundled_config("demo.yml")


def test_backend_requirements(tmp_path):
    with pytest.raises(ConfigError, match="needs 'script'"):
        load_config(_write(tmp_path, BASE.replace("script: rules.jsonl, ", "")))


def test_demo_and_paper_configs_load():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "configs"
    assert bundled_config("demo.yaml") == root / "demo.yaml"  # a checkout's configs/ is the package data
    demo = load_config(bundled_config("demo.yaml"))
    assert demo.model("smollm2").backend == "embedded"
    assert demo.deflectionbench.sources[0].root == root.parent / "tests" / "fixtures" / "generated" / "infoseek"
    paper = load_config(bundled_config("deflectionbench-paper.yaml"))
    assert paper.judge.kind == "llm" and len(paper.deflectionbench.gating.pool) == 4
    assert paper.model("gpt-4o").api_key_env == "OPENAI_API_KEY"
    # the paper reranks mined passages with Contriever (seed 003, 3.2); MiniLM is the demo's stand-in
    assert paper.deflectionbench.retrieval.reranker == Contriever(path=Path("/models/contriever-msmarco"))
    assert demo.deflectionbench.retrieval.reranker == MiniLM()
    assert paper.resolved()["deflectionbench"]["retrieval"]["reranker"] == "contriever:/models/contriever-msmarco"


def test_spec_strings_with_paths_resolve_against_the_file(tmp_path):
    text = (
        BASE
        + """  retrieval: {kb: kb/docs.jsonl, text_encoder: "open_clip:ViT-B-32:ckpt/model.pt", image_encoder: descriptor}
reflvqa:
  source: {name: reddit, root: dumps}
  text_corpus: wiki-offline
  text_entailment: nli:models/nli
"""
    )
    cfg = load_config(_write(tmp_path, text))
    r = cfg.deflectionbench.retrieval
    assert r.kb == KBPath(path=(tmp_path / "kb/docs.jsonl").resolve())
    assert r.text_encoder == OpenClip(arch="ViT-B-32", checkpoint=(tmp_path / "ckpt/model.pt").resolve())
    assert r.image_encoder == Descriptor()
    assert cfg.reflvqa.text_corpus == [WikiOffline()]  # one spec or a list
    assert cfg.reflvqa.text_entailment == NLI(path=(tmp_path / "models/nli").resolve())
    # specs serialise to their short forms, and those validate back into the same specs
    dumped = cfg.resolved()
    assert (
        dumped["deflectionbench"]["retrieval"]["text_encoder"]
        == f"open_clip:ViT-B-32:{(tmp_path / 'ckpt/model.pt').resolve()}"
    )
    assert Settings(**dumped).deflectionbench.retrieval == r


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("text_encoder", "descriptor", "deflectionbench.retrieval.text_encoder"),
        ("image_encoder", "open_clip:ViT-B-32", "deflectionbench.retrieval.image_encoder"),
        ("reranker", "bm25", "deflectionbench.retrieval.reranker"),
    ],
)
def test_invalid_specs_fail_at_load_with_the_field_path(tmp_path, field, value, message):
    text = BASE + f'  retrieval: {{{field}: "{value}"}}\n'
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(_write(tmp_path, text))


def test_lexical_spec_with_threshold_is_not_a_path(tmp_path):
    text = (
        BASE
        + """reflvqa:
  source: {name: reddit, root: dumps}
  text_entailment: "lexical:0.6"
"""
    )
    assert load_config(_write(tmp_path, text)).reflvqa.text_entailment == Lexical(threshold=0.6)


HYPHENS = """
models:
  smollm2-warm: {backend: scripted, script: rules.jsonl, default: "no idea", max_tokens: 32}
  Qwen2.5-VL: {backend: scripted, script: rules.jsonl, default: "no idea"}
deflectionbench:
  sources: [{name: webqa, root: data/webqa}]
  gating: {pool: [smollm2-warm, Qwen2.5-VL]}
"""


@pytest.mark.parametrize(
    "variable",
    [
        "MMCURATE_MODELS__SMOLLM2_WARM__MAX_TOKENS",  # what a shell can export
        "MMCURATE_MODELS__SMOLLM2-WARM__MAX_TOKENS",
    ],
)  # what env(1) can pass
def test_environment_overrides_reach_models_with_hyphens(tmp_path, monkeypatch, variable):
    monkeypatch.setenv(variable, "8")
    monkeypatch.setenv("MMCURATE_MODELS__QWEN2_5_VL__TEMPERATURE", "0.0")
    cfg = load_config(_write(tmp_path, HYPHENS))
    assert sorted(cfg.models) == ["Qwen2.5-VL", "smollm2-warm"]
    assert cfg.model("smollm2-warm").max_tokens == 8 and cfg.model("smollm2-warm").default == "no idea"
    assert cfg.model("Qwen2.5-VL").temperature == 0.0 and cfg.model("Qwen2.5-VL").name == "Qwen2.5-VL"


def test_relative_paths_from_the_environment_resolve_against_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    config = _write(tmp_path / "configs", BASE)
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("MMCURATE_RELEASES_ROOT", "out/releases")
    monkeypatch.setenv("MMCURATE_MODELS__A__SCRIPT", "my-rules.jsonl")
    cfg = load_config(config)
    assert cfg.releases_root == here / "out" / "releases"
    assert cfg.model("a").script == here / "my-rules.jsonl"
    # what the file says still resolves against the file's folder
    assert cfg.workdir == tmp_path / "configs" / "work"
    assert cfg.deflectionbench.sources[0].root == tmp_path / "configs" / "data" / "webqa"


def test_verify_first_checkers_name_models_of_the_config_or_the_lexical_stand_in(tmp_path) -> None:
    """Issue 37: evaluation.verify_first's router and verifier are checked at load."""
    from mmcurate.core.config import load_config
    from mmcurate.core.errors import ConfigError

    base = "models:\n  m: {backend: scripted, script: rules.jsonl}\n"
    (tmp_path / "rules.jsonl").write_text("")
    (tmp_path / "ok.yaml").write_text(base + "evaluation: {verify_first: {router: m, verifier: lexical}}\n")
    assert load_config(tmp_path / "ok.yaml").evaluation.verify_first.verifier == "lexical"
    (tmp_path / "bad.yaml").write_text(base + "evaluation: {verify_first: {verifier: nobody}}\n")
    with pytest.raises(ConfigError, match="unknown model"):
        load_config(tmp_path / "bad.yaml")
