"""mmcurate as a user installs it: a wheel, in a fresh virtual environment, run from a folder
that is not the checkout. Built twice from a copy of the tree: as usual (the C line picker
compiled) and with a C compiler that always fails (CC=/bin/false), which must still give a
working install whose Reddit ingest writes the same files, byte for byte, with the
pure-Python picker. No network: the environments see the test interpreter's packages
(--system-site-packages) and the wheel is installed with --no-deps --no-index.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
OUTPUTS = ("samples.parquet", "quarantine.parquet", "locators.parquet")


def _tree_copy(dest: Path) -> Path:
    """The files a wheel is built from, without build products (a compiled picker, build/)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    folders = set(project["tool"]["setuptools"]["package-dir"].values())
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    for folder in folders:
        shutil.copytree(REPO / folder, dest / folder, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return dest


def _install(work: Path, compiler: str | None) -> Path:
    """A fresh environment with the wheel built from a copy of the tree; its bin folder."""
    tree = _tree_copy(work / "tree")
    env = {**os.environ, **({"CC": compiler} if compiler else {})}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(work / "wheel"), str(tree)], check=True, env=env, cwd=work, capture_output=True)
    subprocess.run([str(BASE_PYTHON), "-m", "venv", "--system-site-packages", str(work / "venv")], check=True)
    wheel = next((work / "wheel").glob("mmcurate-*.whl"))
    subprocess.run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, cwd=work, capture_output=True)
    return work / "venv" / "bin"


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> dict[str, Path]:
    if not BASE_PYTHON.is_file():
        pytest.skip(f"no base interpreter at {BASE_PYTHON} to make a fresh environment with")
    return {name: _install(tmp_path_factory.mktemp(name), compiler)
            for name, compiler in (("c", None), ("no-compiler", "/bin/false"))}


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMCURATE_PURE_PICKER")}
    return subprocess.run([str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_an_installed_wheel_finds_its_configs_outside_a_checkout(installs, tmp_path):
    bin_dir = installs["c"]
    found = _run(bin_dir, "python", "-c", "from mmcurate.core.config import bundled_config as b; "
                 "print(b('demo.yaml')); print(b('dryrun.yaml').parent / 'dryrun' / 'vlm-reader.jsonl')", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    demo, script = map(Path, found.stdout.split())
    assert demo.is_file() and script.is_file() and bin_dir.parent in demo.parents  # from the install, not REPO
    assert demo.read_bytes() == (REPO / "configs" / "demo.yaml").read_bytes()
    assert _run(bin_dir, "mmcurate", "--help", cwd=tmp_path).returncode == 0
    # the demo config reads a checkout's fixtures: an install without them is refused in one line
    refused = _run(bin_dir, "mmcurate", "run", "deflectionbench", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"mmcurate: error: deflectionbench.sources[0] (infoseek): root "
        f"{demo.parent.parent / 'tests' / 'fixtures' / 'generated' / 'infoseek'} is not a readable directory"]


def test_without_a_compiler_the_install_works_and_ingests_reddit_identically(installs, fixtures_root, tmp_path):
    said = {}
    for name, bin_dir in installs.items():
        done = _run(bin_dir, "mmcurate", "ingest", "reddit", str(fixtures_root / "reddit"), "--out", name,
                    cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said[name] = done.stdout.strip().rpartition("; ")[2]
    assert said == {"c": "line picker: c", "no-compiler": "line picker: python"}
    for name in OUTPUTS:
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "no-compiler" / name).read_bytes(), name
    images = {p.relative_to(tmp_path / "c"): p.read_bytes() for p in (tmp_path / "c" / "images").rglob("*")
              if p.is_file()}
    assert images and images == {p.relative_to(tmp_path / "no-compiler"): p.read_bytes()
                                 for p in (tmp_path / "no-compiler" / "images").rglob("*") if p.is_file()}
    reports = [json.loads((tmp_path / name / "ingest.json").read_text()) for name in ("c", "no-compiler")]
    assert [r.pop("reader") for r in reports] == [{"line_picker": "c"}, {"line_picker": "python"}]
    assert reports[0] == reports[1]
