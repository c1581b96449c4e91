"""`make demo` step by step: wall time, CPU time and load average of every command.

The commands are the Makefile's own (``make -n demo``, set-up and fixtures taken as done),
run one after the other from this checkout with the Makefile's exported variables (``make
demo`` runs its two chains side by side; here each step runs alone, so its wall and CPU are
its own). Per step: wall
seconds; CPU seconds (user + sys) of the command and every process it waited for (the
temporary Prefect API and the llama.cpp server are its children, so they count); the
1-minute load average before the step (on a shared machine wall time follows the load, CPU
time much less). Each step's output goes to ``OUT/NN-<command>.log``; the table is printed
and written to ``OUT/steps.md`` as the step table of docs/demo.md.

    python bench/demo_profile.py [--clean] [--root DIR] [--out DIR] [--py-spy PROGRAM]

``--clean`` first removes the demo's output (``.mmcurate/`` and ``releases_out/``) so the run
is the one a fresh clone makes; without it a rerun answers from the caches. ``--root DIR``
puts them under DIR instead of this checkout (``MMCURATE_WORKDIR``, ``MMCURATE_RELEASES_ROOT``
and the Makefile's ``DEMO_RELEASES`` / ``DEMO_WORKDIR``), e.g. to run a second demo beside one.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


SHARED_API = "-m mmcurate.tasks.shared_api "


def demo_commands(variables: list[str]) -> tuple[list[str], bool]:
    """The demo target's commands as make would run them (set-up and fixtures not remade), and
    whether the demo runs them under one shared Prefect API (``tasks/shared_api.py``; make -n
    prints the wrapper, then the commands of the target it runs)."""
    out = subprocess.run(
        ["make", "-s", "-n", "-o", "setup", "-o", "fixtures", "demo", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [line.strip() for line in out.replace("\\\n", " ").splitlines() if line.strip()]
    shared = bool(lines) and SHARED_API in lines[0]
    return lines[1:] if shared else lines, shared


def makefile_exports() -> dict[str, str]:
    """``export NAME := VALUE`` lines of the Makefile (the demo runs with them)."""
    found = re.findall(r"^export\s+(\w+)\s*:?=\s*(.*)$", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    return {name: value.strip() for name, value in found}


def label(command: str) -> str:
    """The command without the program, ``--config``/``--out`` and their values, and the release root."""
    words, kept = shlex.split(command)[1:], []
    while words:
        word = words.pop(0)
        if word in ("--config", "--out"):
            words.pop(0)
            continue
        kept.append(re.sub(r"^.*(releases_out|\.mmcurate/evaluations)/", "", word))
    return " ".join(kept)


def cpu_of_children() -> float:
    """CPU seconds (user + sys) of every child this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# what a sampled stack is spent on, first match wins: (label, process command-line part or None, frame part)
IDLE = ("EpollSelector.select", "Condition.wait", "_worker (concurrent", "lifeline.py", "time.sleep")
KINDS = [
    ("SmolLM2 (llama.cpp server)", "llama_launch", ""),
    ("Prefect API", "mmcurate.tasks.prefect_api", ""),
    ("imports", None, "_find_and_load"),
    ("MiniLM", None, "sentence_transformers/"),
    ("BERTopic/UMAP", None, "bertopic/"),
    ("Great Expectations", None, "great_expectations/"),
    ("Prefect client", None, "prefect/"),
]


def where(stacks: Path, top: int = 3) -> str:
    """The largest shares of a step's py-spy samples (threads of every process; those whose innermost
    frame waits, IDLE, are left out: py-spy does not always see a thread is idle), by KINDS."""
    counts: dict[str, int] = {}
    for line in stacks.read_text().splitlines() if stacks.exists() else []:
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if any(idle in frames[-1] for idle in IDLE):
            continue
        process = next((frame for frame in reversed(frames) if frame.startswith("process ")), "")  # the innermost
        kind = next(
            (label for label, command, frame in KINDS if (command is None or command in process) and frame in stack),
            "other",
        )
        counts[kind] = counts.get(kind, 0) + int(n)
    total = sum(counts.values()) or 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{label} {100 * n / total:.0f}%" for label, n in ranked)


def run_one(command: str, env: dict[str, str], log: Path, py_spy: str | None) -> tuple[int, float, float]:
    """Run ``command``: its exit code, the CPU seconds of its process tree (``wait4``: the
    command with every process it waited for) and those of the py-spy sampling it (``--py-spy``:
    collapsed stacks of the command and its children), which are not the demo's."""
    with log.open("w") as handle:
        proc = subprocess.Popen(shlex.split(command), cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    spy = (
        subprocess.Popen(
            [
                py_spy,
                "record",
                "--pid",
                str(proc.pid),
                "--subprocesses",
                "--nonblocking",
                "--rate",
                "20",
                "--format",
                "raw",
                "--output",
                str(log.with_suffix(".stacks")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if py_spy
        else None
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reaped = cpu_of_children()
    if spy is not None:
        spy.wait()
    return proc.returncode, usage.ru_utime + usage.ru_stime, cpu_of_children() - reaped


def run_steps(commands: list[str], extra: dict[str, str], out: Path, py_spy: str | None) -> tuple[list[dict], float]:
    """One row per step, and the CPU seconds of the py-spy runs. The steps get this process's
    environment as it is now (a shared API's ``PREFECT_API_URL``) with ``extra``."""
    env = {**os.environ, **makefile_exports(), **extra}
    rows, spied = [], 0.0
    for number, command in enumerate(commands, 1):
        name = label(command)
        log = out / f"{number:02d}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')[:60]}.log"
        load, wall0 = os.getloadavg()[0], time.monotonic()
        code, cpu, spy = run_one(command, env, log, py_spy)
        spied += spy
        row = {
            "step": name,
            "wall": time.monotonic() - wall0,
            "cpu": cpu,
            "load": load,
            "where": where(log.with_suffix(".stacks")) if py_spy else "",
        }
        rows.append(row)
        print(
            f"{number:>2} {name:<60} {row['wall']:>7.1f} s wall {row['cpu']:>7.1f} s CPU load {row['load']:.1f}",
            flush=True,
        )
        if code != 0:
            sys.exit(f"demo_profile: step {number} ({command}) exited {code}; see {log}")
    return rows, spied


def table(rows: list[dict]) -> str:
    lines = ["| step | wall s | CPU s | load before | py-spy samples |", "|---|---:|---:|---:|---|"]
    lines += [
        f"| `{r['step']}` | {r['wall']:.1f} | {r['cpu']:.1f} | {r['load']:.1f} | {r['where']} |"
        if r["wall"] is not None
        else f"| {r['step']} | | {r['cpu']:.1f} | | |"
        for r in rows
    ]
    wall, cpu = sum(r["wall"] or 0.0 for r in rows), sum(r["cpu"] for r in rows)
    lines.append(f"| total | {wall:.1f} ({wall / 60:.1f} min) | {cpu:.1f} ({cpu / 60:.1f} min) | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove ROOT's .mmcurate/ and releases_out/ first")
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="write the demo's workdir and releases under ROOT (default: this checkout, as make demo)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "demo-profile")
    parser.add_argument("--py-spy", metavar="PROGRAM", help="sample every step with py-spy (its CPU is not counted)")
    args = parser.parse_args()
    root = args.root.resolve()
    workdir, releases = root / ".mmcurate", root / "releases_out"
    if args.clean:
        for folder in (workdir, releases):
            shutil.rmtree(folder, ignore_errors=True)
    # the config's workdir and releases_root, and the Makefile's paths to them, moved to ROOT
    extra = {"MMCURATE_WORKDIR": str(workdir), "MMCURATE_RELEASES_ROOT": str(releases)}
    variables = [f"DEMO_RELEASES={releases}", f"DEMO_WORKDIR={workdir}"]
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"demo_profile: {ROOT} on {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    commands, shared = demo_commands(variables)
    if shared:  # as `make demo` runs them: one temporary Prefect API for every step
        from mmcurate.tasks.prefect_api import temporary_api

        before = cpu_of_children()
        with temporary_api():
            rows, spied = run_steps(commands, extra, args.out, args.py_spy)
        api = cpu_of_children() - before - sum(r["cpu"] for r in rows) - spied
        rows.append(
            {
                "step": "the shared Prefect API (tasks/shared_api.py)",
                "wall": None,
                "cpu": api,
                "load": None,
                "where": "",
            }
        )
    else:
        rows, _ = run_steps(commands, extra, args.out, args.py_spy)
    text = table(rows)
    (args.out / "steps.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
