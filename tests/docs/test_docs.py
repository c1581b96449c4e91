"""The documentation cannot go stale (issue 44 item 5): every repository path that docs/ and
README.md mention exists, every ``mmcurate`` command and ``make`` target they show is real, every
``mmcurate.<module>`` they name imports, and the site builds with warnings as errors and offline."""

from __future__ import annotations

import functools
import glob
import importlib
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main

from mmcurate.cli import app

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]
# the folders of the checkout a page may name: the packages' folders and the ones beside them
FOLDERS = sorted(
    {
        *tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values(),
        "bench",
        "docs",
        "tests",
        "tools",
    }
)
# a path starts a word (not inside a value such as ``nli:models/nli`` or ``../tests/...``, which are
# the user's paths or relative to a config file, nor inside ``releases_out/...``)
FOLDER = "|".join(map(re.escape, FOLDERS))
PATH = re.compile(rf"(?<![\w./:=-])((?:{FOLDER})/[\w.*<>{{}},/-]*)")
COMMAND = re.compile(r"(?<![\w./-])mmcurate ([a-z][a-z-]*(?: / [a-z][a-z-]*)*)(?: ([a-z][a-z/-]*))?")
MAKE = re.compile(r"(?<![\w./-])make ([a-z][\w-]*)")
MODULE = re.compile(r"(?<![\w./-])mmcurate(?:\.\w+)+")
# paths that look like the checkout's but are not: each with what it is
NOT_OURS = {
    "docs/dataset.md": "facebookresearch/CRAG-MM's dataset description",
    "tools/eval_tool.zip": "MME's evaluation tool in BradyFU/Awesome-Multimodal-Large-Language-Models",
    "releases/pope/1.0.0": "a release under the default releases_root of a config of the user's (mme.yaml)",
}


def code(text: str) -> Iterator[str]:
    """The code a page shows: its fenced blocks but YAML ones (their paths are a user's files, e.g.
    SAM2's config) and its inline code spans, not its prose."""
    prose: list[str] = []
    block: list[str] = []
    lang = None  # inside a fenced block: its language
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if lang is not None and lang != "yaml":
                yield "".join(block)
            lang, block = (line[3:].strip() if lang is None else None), []
        else:
            (prose if lang is None else block).append(line)
    yield from (" ".join(span.split()) for span in re.findall(r"`([^`]+)`", "".join(prose)))


def missing_paths(snippet: str) -> list[str]:
    """The repository paths a snippet names that match no file or folder (``<name>`` and ``*`` are
    wildcards, ``{a,b}`` alternatives)."""
    missing = []
    for path in PATH.findall(snippet):
        path = path.rstrip(".,:")
        if path in NOT_OURS:
            continue
        pattern = re.sub(r"<[^>]*>", "*", path)
        choices = re.search(r"\{([^}]*)\}", pattern)
        patterns = [pattern.replace(choices.group(0), c) for c in choices.group(1).split(",")] if choices else [pattern]
        if not all(glob.glob(p, root_dir=REPO) for p in patterns):
            missing.append(path)
    return missing


@functools.cache
def cli_commands() -> dict:
    return typer.main.get_command(app).commands


@functools.cache
def make_targets() -> frozenset[str]:
    return frozenset(re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), flags=re.M))


def unknown_commands(snippet: str) -> list[str]:
    """The ``mmcurate COMMAND [SUBCOMMAND]`` a snippet shows that the CLI does not have."""
    commands = cli_commands()
    unknown = []
    for names, sub in COMMAND.findall(snippet):
        for name in names.split(" / "):
            if name not in commands:
                unknown.append(f"mmcurate {name}")
            elif sub and hasattr(commands[name], "commands"):  # a group: run, annotate, export
                unknown += [f"mmcurate {name} {s}" for s in sub.split("/") if s and s not in commands[name].commands]
    return unknown


def unknown_targets(snippet: str) -> list[str]:
    return [f"make {t}" for t in MAKE.findall(snippet) if t not in make_targets()]


def unknown_modules(snippet: str) -> list[str]:
    """``mmcurate.a.b`` names that import as a module, or as a module's attribute."""
    unknown = []
    for dotted in MODULE.findall(snippet):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                found = getattr(found, attr, None)
            if found is None:
                unknown.append(dotted)
            break
    return unknown


def stale(check) -> list[str]:
    return [
        f"{page.relative_to(REPO)}: {name}"
        for page in PAGES
        for snippet in code(page.read_text())
        for name in check(snippet)
    ]


def test_the_checks_see_a_stale_name():
    """Each check reports what no longer exists (a moved module, a renamed command), so the tests
    below fail when the code moves under the docs."""
    assert missing_paths("see `core/errors.py` and `evaluation/no_such_module.py`") == ["evaluation/no_such_module.py"]
    assert missing_paths("`tests/fixtures/builders/<name>.py`, `annotation/{reflectv,pope}/`") == []
    assert missing_paths("`nli:models/nli`, `releases_out/pope/1.0.0`, `../tests/x`") == []
    assert unknown_commands("mmcurate evaluate RELEASE") == []
    assert unknown_commands("mmcurate verify / validate / bless") == ["mmcurate bless"]
    assert unknown_commands("mmcurate annotate export/import-all RELEASE") == ["mmcurate annotate import-all"]
    assert unknown_commands("mmcurate run deflectionbench") == [] and unknown_commands("mmcurate run mmlu")
    assert unknown_targets("make demo && make docs && make deploy") == ["make deploy"]
    assert unknown_modules("python -m mmcurate.tasks.shared_api, mmcurate.benchmarks.register(B)") == []
    assert unknown_modules("mmcurate.evaluation.no_such") == ["mmcurate.evaluation.no_such"]
    assert list(code("a `b\n c` d\n```yaml\nx: `e`\n```\n```bash\nmmcurate run\n```\n`f`\n")) == [
        "mmcurate run\n",
        "b c",
        "f",
    ]


def test_every_repository_path_the_docs_mention_exists():
    assert stale(missing_paths) == []
    everything = "".join(page.read_text() for page in PAGES)
    assert [path for path in NOT_OURS if path not in everything] == []  # the exceptions are still needed


def test_every_command_the_docs_show_is_a_command_of_the_cli():
    assert stale(unknown_commands) == [] and stale(unknown_targets) == []


def test_every_module_the_docs_name_imports():
    assert stale(unknown_modules) == []


def test_the_readme_is_the_first_five_minutes():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "make demo" in readme and "make test" in readme and "make docs" in readme
    assert "docs/figures.md" in readme  # the bench families link to their figures


def test_the_site_builds_strictly_and_offline(tmp_path):
    """``mkdocs build --strict`` (what ``make docs`` runs; a broken link or anchor, a page missing
    from nav fails) and nothing the pages load comes from the network: no web font, no CDN script
    or stylesheet (material's bundle fetches mermaid from unpkg only for a mermaid block: none)."""
    pytest.importorskip("material")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    pages = list(site.rglob("*.html"))
    assert len(pages) >= len(PAGES) - 1  # every docs page (README.md is not one)
    remote = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
    assert [p.name for p in pages if remote.search(p.read_text())] == []
    assert [c.name for c in site.rglob("*.css") if re.search(r"url\([\"']?(?:https?:)?//", c.read_text())] == []
    assert not any("```mermaid" in page.read_text() for page in PAGES)
    assert (site / "search" / "search_index.json").exists()  # search runs in the browser, offline
