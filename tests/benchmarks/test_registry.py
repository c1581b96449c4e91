"""The benchmark registry: every benchmark's parts load, commands and checks come from it, and
no library code decides by comparing benchmark names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import mmcurate.cli.run
import mmcurate.evaluation.builtin  # noqa: F401  the layers' own parts, registered
import mmcurate.flows.builtin  # noqa: F401
import mmcurate.planning.builtin  # noqa: F401
import mmcurate.releases.builtin  # noqa: F401
import mmcurate.review.builtin  # noqa: F401
from mmcurate.benchmarks import BENCHMARKS, get, registered_part
from mmcurate.core.errors import ConfigError, MmcurateError
from mmcurate.releases.curation import begin_curation
from mmcurate.releases.errors import ReleaseError

REPO = Path(__file__).resolve().parents[2]
LIBRARY = [
    p
    for p in REPO.glob("*/**/*.py")
    if p.parts[len(REPO.parts)] not in ("tests", "bench", "benchmarks", ".venv", "build")
]


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_every_part_of_every_benchmark_loads(name):
    benchmark = get(name)
    assert benchmark.name == name and (REPO.parent / "shared" / "seeds" / benchmark.paper).name == benchmark.paper
    kind = benchmark.release_kind()
    assert kind.benchmark == name and kind.configs and callable(kind.checks) and callable(kind.distributions)
    assert benchmark.flow("curate").name == name
    for source in benchmark.sources:
        from mmcurate.sources import adapter_class

        assert adapter_class(source).__name__
    if benchmark.evaluation is not None:
        assert callable(benchmark.required_evaluation().steps_function(name))
        assert benchmark.evaluation.arguments(name, {}, {}) is not None
    if registered_part(name, "judge_review") is not None:
        assert benchmark.judges().benchmark == name
    if registered_part(name, "plan") is not None:
        assert callable(benchmark.planner())
    if registered_part(name, "recurate") is not None:  # re-curation steps come with their plan and their roles
        assert callable(benchmark.recuration_steps()) and callable(benchmark.recuration_planner())
        assert registered_part(name, "release") is not None


def test_unknown_benchmark_and_missing_parts_are_one_line():
    with pytest.raises(
        ConfigError, match="unknown benchmark .mme.; known: deflectionbench, reflvqa, reflectv, cragmm, pope"
    ):
        get("mme")
    with pytest.raises(MmcurateError, match="reflectv has no review of its evaluation's judge in mmcurate"):
        get("reflectv").judges()


def test_evaluation_options_are_checked_against_the_benchmark():
    flags = mmcurate.cli.run.FLAGS
    with pytest.raises(
        MmcurateError,
        match=r"^--scenario, --system: not an option of the reflvqa evaluation "
        r"\(its options: --setting, --queries, --subset\)$",
    ):
        get("reflvqa").evaluation.arguments("reflvqa", {"scenarios": ["oracle"], "system": "plain"}, flags)
    assert get("reflvqa").evaluation.arguments("reflvqa", {"queries": [4]}, flags) == {
        "settings": ["text", "image", "multi", "two-step"],
        "queries": [4],
    }
    with pytest.raises(MmcurateError, match="unknown RefLVQA setting"):
        get("reflvqa").evaluation.arguments("reflvqa", {"settings": ["oracle"]}, flags)
    with pytest.raises(MmcurateError, match="^--setting: not an option of the deflectionbench"):
        get("deflectionbench").evaluation.arguments("deflectionbench", {"settings": ["text"]}, flags)
    options = get("deflectionbench").evaluation.arguments("deflectionbench", {"strictness_sweep": True}, flags)
    assert options["abstention"] == ["none", "soft", "moderate", "severe"] and options["system"] == "plain"
    with pytest.raises(MmcurateError, match="not both"):
        get("deflectionbench").evaluation.arguments(
            "deflectionbench", {"strictness_sweep": True, "abstention": ["soft"]}, flags
        )


@pytest.mark.parametrize("name", [name for name, b in BENCHMARKS.items() if b.evaluation])
def test_checked_evaluation_options_check_again_unchanged(name):
    """The command line checks the options before Prefect starts and passes them checked to the
    evaluation flow, which checks them again (a deployment has no command line before it)."""
    evaluation = get(name).evaluation
    checked = evaluation.arguments(name, {}, {})
    assert evaluation.arguments(name, checked, {}) == checked


def test_one_evaluation_flow_and_one_recuration_flow():
    """The benchmarks name their steps, not flows: the Prefect flows are each benchmark's
    curation, the evaluation, the re-curation and watch, and all default to one demo config."""
    import importlib
    import pkgutil

    from prefect import Flow

    import mmcurate.flows

    flows, demo = set(), set()
    for info in pkgutil.walk_packages(mmcurate.flows.__path__, "mmcurate.flows."):  # each benchmark's subpackage too
        module = importlib.import_module(info.name)
        flows |= {
            value.name
            for value in vars(module).values()
            if isinstance(value, Flow) and value.fn.__module__ == module.__name__
        }
        demo |= {id(module.DEMO_CONFIG)} if hasattr(module, "DEMO_CONFIG") else set()
    assert flows == {b.name for b in BENCHMARKS.values() if b.curated} | {"evaluate", "recurate-release", "watch"}
    assert demo == {id(mmcurate.flows.DEMO_CONFIG)}


def test_run_commands_are_the_curated_benchmarks():
    commands = {c.name for c in mmcurate.cli.run.run_app.registered_commands}
    assert commands == {b.name for b in BENCHMARKS.values() if b.curated}


CONFIG = """
workdir: work
releases_root: releases
models:
  reader: {{backend: scripted, script: reader.jsonl}}
deflectionbench:
  sources: [{{name: {source}, root: {root}}}]
  gating: {{pool: [reader]}}
"""


def _config(tmp_path: Path, source: str) -> Path:
    (tmp_path / "reader.jsonl").write_text('{"when_all": ["x"], "answer": "y"}\n')
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(source=source, root=tmp_path))
    return path


def test_a_curation_refuses_what_it_can_before_any_work(tmp_path):
    with pytest.raises(
        ConfigError, match=r"deflectionbench.sources\[0\]: source 'reddit': deflectionbench reads infoseek, evqa"
    ):
        begin_curation(_config(tmp_path, "reddit"), "deflectionbench")
    with pytest.raises(ReleaseError, match="release version '1.0' is not a semantic version"):
        begin_curation(_config(tmp_path, "webqa"), "deflectionbench", "1.0")
    run = begin_curation(_config(tmp_path, "webqa"), "deflectionbench", "2.0.0")
    assert (run.version, run.benchmark.name, run.section.sources[0].name) == ("2.0.0", "deflectionbench", "webqa")


def test_cli_refuses_a_bad_version_before_prefect_starts(tmp_path, monkeypatch, capsys):
    def refuse(call):
        raise AssertionError("the command started a flow run")

    monkeypatch.setattr(mmcurate.cli.run, "run_flow", refuse)
    monkeypatch.setattr(
        sys,
        "argv",
        ["mmcurate", "run", "deflectionbench", "--config", str(_config(tmp_path, "webqa")), "--version", "1.0"],
    )
    from mmcurate.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "is not a semantic version" in err


COMPARISON = re.compile(
    r"""(==|!=)\s*["'](?P<a>[a-z-]+)["']|["'](?P<b>[a-z-]+)["']\s*(==|!=)|\bin\s*\(\s*["'](?P<c>[a-z-]+)["']"""
)


def test_no_library_code_compares_benchmark_names():
    found = []
    for path in LIBRARY:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in COMPARISON.finditer(line):
                if (match["a"] or match["b"] or match["c"]) in BENCHMARKS:
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == []
