"""lmms-eval's own task objects over an exported task folder, in a child process: importing
lmms-eval changes the process it runs in (its task modules set global state that changed a
later curation test's output in the same session), so the suite never imports it.

``harness_numbers``: the numbers its aggregations compute from given replies, as an lmms-eval
run would (``process_results`` per document, then each metric's aggregation over the task's
records). ``harness_documents``: what each task sends per document (``doc_to_messages``: the
roles, the text parts, the images' sizes; ``doc_to_visual``'s sizes)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _child(mode: str, include: Path, group: str, given: Any, work: Path) -> Any:
    (work / "in.json").write_text(json.dumps(given))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.releases.lmms_child",
            mode,
            str(include),
            group,
            str(work / "in.json"),
            str(work / "out.json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((work / "out.json").read_text())


def harness_numbers(
    include: Path, group: str, replies: Mapping[str, Mapping[str, str]], work: Path
) -> dict[str, dict[str, Any]]:
    """Per task, every metric's value over its documents; ``replies[task][sample_id]`` is the
    reply (the key ``"*"`` serves every task)."""
    return _child("numbers", include, group, replies, work)


def harness_documents(include: Path, group: str, work: Path) -> dict[str, list[dict[str, Any]]]:
    """Per task, what each of its documents sends (in the child's words, see the module docstring)."""
    return _child("documents", include, group, None, work)
