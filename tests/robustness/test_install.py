"""mmcurate as a user installs it: a wheel, in a fresh virtual environment, run from a folder
that is not the checkout. Built twice from a copy of the tree: as usual (the C line picker
compiled) and with a C compiler that always fails (CC=/bin/false), which must still give a
working install whose Reddit ingest writes the same files, byte for byte, with the
pure-Python picker. No network: each environment sees the test environment's packages
through a .pth file naming its site-packages (never the base interpreter's, which holds no
project dependency on a clean machine, and whatever it holds elsewhere must not count), and
the wheel is installed with --no-deps --no-index. Since the environment sees every package of
the test environment, an import the wheel does not declare would still work there: every
top-level import name of the installed code must belong to a distribution the wheel declares
(``importlib.metadata.packages_distributions``).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BASE_SITE = Path(sysconfig.get_path("purelib", vars={"base": sys.base_prefix, "platbase": sys.base_prefix}))
OUTPUTS = ("samples.parquet", "quarantine.parquet", "locators.parquet")
# optional extras the test environment does not install: their import name -> the distribution
# pyproject.toml declares as that extra (importlib.metadata cannot map a package that is not there);
# the other extras count as declared, the test extra does not
NOT_INSTALLED = {"vllm": "vllm", "sam2": "sam2", "cragmm_search": "cragmm-search-pipeline"}
# run inside the fresh environment: import every module of the installed package, then map every
# top-level import name of its code (lazy ones in functions too) to the distributions declared
IMPORTS_CHECK = """
import ast, importlib, json, pkgutil, re, sys
from importlib import metadata
from pathlib import Path
import mmcurate

from packaging.requirements import Requirement

norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
declared = {norm(r.name) for r in map(Requirement, metadata.requires("mmcurate"))
            if 'extra == "test"' not in str(r.marker or "")}  # the test extra is not for users
not_installed = json.loads(sys.argv[1])
modules, failed, names = [], {}, {}
for info in pkgutil.walk_packages(mmcurate.__path__, "mmcurate."):
    modules.append(info.name)
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed[info.name] = repr(exc)
for path in Path(mmcurate.__file__).parent.rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
        found = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in found:
            names.setdefault(name.split(".")[0], set()).add(path.name)
distributions = metadata.packages_distributions()
undeclared = {}
for name, files in sorted(names.items()):
    if name in sys.stdlib_module_names or name == "mmcurate":
        continue
    owners = distributions.get(name) or [not_installed.get(name, "(not installed)")]
    if not any(norm(owner) in declared for owner in owners):
        undeclared[name] = {"distributions": owners, "files": sorted(files)}
print(json.dumps({"modules": modules, "failed": failed, "undeclared": undeclared,
                  "install": str(Path(mmcurate.__file__).parent)}))
"""


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


def _venv_over_test_env(venv: Path) -> None:
    """A venv without the base interpreter's site-packages that sees this test environment's
    packages: a path line in a .pth file (a path line adds the folder only; the folder's own
    .pth files, such as the checkout's editable finder, stay unread)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = [p for p in site.getsitepackages() if Path(p).resolve() != BASE_SITE.resolve()]
    (Path(purelib) / "test-environment.pth").write_text("".join(f"{p}\n" for p in ours))


def _install(work: Path, compiler: str | None) -> Path:
    """A fresh environment with the wheel built from a copy of the tree; its bin folder."""
    tree = _tree_copy(work / "tree")
    env = {**os.environ, **({"CC": compiler} if compiler else {})}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(work / "wheel"),
            str(tree),
        ],
        check=True,
        env=env,
        cwd=work,
        capture_output=True,
    )
    _venv_over_test_env(work / "venv")
    wheel = next((work / "wheel").glob("mmcurate-*.whl"))
    subprocess.run(
        [str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        cwd=work,
        capture_output=True,
    )
    return work / "venv" / "bin"


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> dict[str, Path]:
    return {
        name: _install(tmp_path_factory.mktemp(name), compiler)
        for name, compiler in (("c", None), ("no-compiler", "/bin/false"))
    }


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MMCURATE_PURE_PICKER")}
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_the_environment_sees_the_test_environment_not_the_base_interpreter(installs, tmp_path):
    """What the base interpreter holds (nothing on a clean machine, anything on another) must not
    decide whether the install works: its site-packages is not on the new environment's path."""
    seen = _run(
        installs["c"],
        "python",
        "-c",
        "import json, sys, typer; print(json.dumps([sys.path, typer.__file__]))",
        cwd=tmp_path,
    )
    assert seen.returncode == 0, seen.stderr
    path, typer_file = json.loads(seen.stdout)
    assert str(BASE_SITE) not in path and BASE_SITE.resolve() not in {Path(p).resolve() for p in path if p}
    assert Path(typer_file).resolve().is_relative_to(Path(sys.prefix).resolve())


def test_an_installed_wheel_finds_its_configs_outside_a_checkout(installs, tmp_path):
    bin_dir = installs["c"]
    found = _run(
        bin_dir,
        "python",
        "-c",
        "from mmcurate.core.config import bundled_config as b; "
        "print(b('demo.yaml')); print(b('dryrun.yaml').parent / 'dryrun' / 'vlm-reader.jsonl')",
        cwd=tmp_path,
    )
    assert found.returncode == 0, found.stderr
    demo, script = map(Path, found.stdout.split())
    assert demo.is_file() and script.is_file() and bin_dir.parent in demo.parents  # from the install, not REPO
    assert demo.read_bytes() == (REPO / "configs" / "demo.yaml").read_bytes()
    assert _run(bin_dir, "mmcurate", "--help", cwd=tmp_path).returncode == 0
    # the demo config reads a checkout's fixtures: an install without them is refused in one line
    refused = _run(bin_dir, "mmcurate", "run", "deflectionbench", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"mmcurate: no --config: the bundled {demo} with workdir {tmp_path / '.mmcurate'} and releases_root "
        f"{tmp_path / 'releases_out'}",
        f"mmcurate: error: deflectionbench.sources[0] (infoseek): root "
        f"{demo.parent.parent / 'tests' / 'fixtures' / 'generated' / 'infoseek'} is not a readable directory",
    ]


def test_without_a_compiler_the_install_works_and_ingests_reddit_identically(installs, fixtures_root, tmp_path):
    said = {}
    for name, bin_dir in installs.items():
        done = _run(bin_dir, "mmcurate", "ingest", "reddit", str(fixtures_root / "reddit"), "--out", name, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said[name] = done.stdout.strip().rpartition("; ")[2]
    assert said == {
        "c": "lines picked by the compiled C scanner",
        "no-compiler": "lines picked in pure Python (same "
        "output, slower: no C scanner built, or MMCURATE_PURE_PICKER=1)",
    }
    for name in OUTPUTS:
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "no-compiler" / name).read_bytes(), name
    images = {
        p.relative_to(tmp_path / "c"): p.read_bytes() for p in (tmp_path / "c" / "images").rglob("*") if p.is_file()
    }
    assert images and images == {
        p.relative_to(tmp_path / "no-compiler"): p.read_bytes()
        for p in (tmp_path / "no-compiler" / "images").rglob("*")
        if p.is_file()
    }
    reports = [json.loads((tmp_path / name / "ingest.json").read_text()) for name in ("c", "no-compiler")]
    assert [r.pop("reader") for r in reports] == [{"line_picker": "c"}, {"line_picker": "python"}]
    assert reports[0] == reports[1]


def test_every_module_imports_and_every_import_is_declared(installs, tmp_path):
    bin_dir = installs["c"]
    checked = _run(bin_dir, "python", "-c", IMPORTS_CHECK, json.dumps(NOT_INSTALLED), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout.splitlines()[-1])
    assert Path(report["install"]).is_relative_to(bin_dir.parent)  # the wheel's code, not the checkout's
    assert len(report["modules"]) > 200 and "mmcurate.flows.evaluate" in report["modules"]
    assert report["failed"] == {}
    assert report["undeclared"] == {}


def test_an_undeclared_import_is_found(installs, tmp_path):
    """The check above fails on an import the wheel does not declare, though the package is there."""
    bin_dir = installs["c"]
    site_packages = Path(
        _run(
            bin_dir, "python", "-c", "import mmcurate, os; print(os.path.dirname(mmcurate.__file__))", cwd=tmp_path
        ).stdout.strip()
    )
    probe = site_packages / "core" / "_undeclared_probe.py"
    probe.write_text("import hypothesis  # a test dependency: present here, never declared for users\n")
    try:
        checked = _run(bin_dir, "python", "-c", IMPORTS_CHECK, json.dumps(NOT_INSTALLED), cwd=tmp_path)
    finally:
        probe.unlink()
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout.splitlines()[-1])
    assert list(report["undeclared"]) == ["hypothesis"]
    assert report["undeclared"]["hypothesis"]["files"] == ["_undeclared_probe.py"]
