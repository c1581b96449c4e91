"""What storing through fsspec costs on one machine: the dry-run DeflectionBench curation
(configs/dryrun.yaml on the bundled fixtures) and its cached rerun, side by side in one run,
with ``workdir`` and ``releases_root`` as

- plain paths (today's code path),
- ``file://`` URLs (read at load as the same local paths: this must cost nothing),
- ``s3://`` URLs on a local moto S3 server (with ``--s3``: the object-store path, a local
  working copy plus publication by the marker rule; loopback, so it shows our overhead,
  not a network's).

Each variant runs ``mmcurate run deflectionbench`` twice in a fresh folder (the second run
answers from the response cache and finds its release published). Prints wall seconds, the
rerun/first ratio and each variant's ratio to the plain paths, with the load average before
each run (the machine is shared: compare ratios taken in the same run).

``--baseline REV`` adds the plain paths with the code of git revision ``REV`` (``git archive``
of it built with pip into a temporary folder, put first on ``PYTHONPATH``), run first: the
single-machine speed before a change, beside it. ``--rounds N`` repeats every variant N times,
round by round, and prints each variant's median.

    python bench/storage_overhead.py [--s3] [--baseline REV] [--rounds N] [--out DIR]

``memory://`` is left out: an in-memory store lives in one process, and every run here is
its own process.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "generated"
sys.path.insert(0, str(ROOT))

from tests.dryrun import dryrun_config


def timed_run(config: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """Wall seconds of one curation run, and the 1-minute load average before it."""
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with log.open("w") as out:
        subprocess.run(
            [str(Path(sys.executable).parent / "mmcurate"), "run", "deflectionbench", "--config", str(config)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            cwd=config.parent,
        )
    return time.perf_counter() - start, load


def baseline_env(rev: str, out: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the package as it was at ``rev`` first on ``PYTHONPATH``: the revision's files
    (``git archive``) built and installed with pip into a folder of ``out``, offline."""
    source, site = out / f"baseline-{rev}" / "source", out / f"baseline-{rev}" / "site"
    source.mkdir(parents=True)
    found = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True)
    if found.returncode:
        sys.exit(f"storage_overhead.py: --baseline {rev}: {found.stderr.decode().strip().splitlines()[-1]}")
    archive = found.stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--target", str(site), str(source)],
        check=True,
    )
    return {**env, "PYTHONPATH": str(site)}


def s3_endpoint() -> tuple[str, object]:
    """A moto S3 server on loopback with one bucket; its endpoint and the server (to stop)."""
    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    s3fs.S3FileSystem(endpoint_url=endpoint, key="bench", secret="bench").mkdir("bench")
    return endpoint, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--s3", action="store_true", help="also run on a local moto S3 server")
    parser.add_argument("--baseline", metavar="REV", help="also plain paths with the code of git revision REV")
    parser.add_argument("--rounds", type=int, default=1, help="runs of every variant, round by round (medians)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs (default: a temp folder)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="storage-overhead-"))
    env = {**os.environ, "MMCURATE_SCRATCH": str(out / "scratch"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def at_paths(home: Path) -> tuple[str, str]:
        return str(home / "work"), str(home / "releases")

    variants: dict[str, tuple[Callable[[Path], tuple[str, str]], dict[str, str]]] = {}
    if args.baseline:
        variants[f"path @ {args.baseline}"] = (at_paths, baseline_env(args.baseline, out, env))
    variants["path"] = (at_paths, env)
    variants["file://"] = (lambda home: (f"file://{home}/work", f"file://{home}/releases"), env)
    server = None
    if args.s3:
        endpoint, server = s3_endpoint()
        s3_env = {
            **env,
            "FSSPEC_S3_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        variants["s3://"] = (
            lambda home: (
                f"s3://bench/{home.parent.name}-{home.name}/work",
                f"s3://bench/{home.parent.name}-{home.name}/releases",
            ),
            s3_env,
        )
    times: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in variants}
    try:
        for round_ in range(args.rounds):
            for name, (where, variant_env) in variants.items():
                home = out / "".join(c if c.isalnum() else "-" for c in name).strip("-") / f"round-{round_}"
                home.mkdir(parents=True)
                workdir, releases_root = where(home)
                config = dryrun_config(home, FIXTURES, workdir=workdir, releases_root=releases_root)
                first, load_first = timed_run(config, variant_env, home / "first.log")
                rerun, load_rerun = timed_run(config, variant_env, home / "rerun.log")
                times[name].append((first, rerun, load_first, load_rerun))
                print(f"{name}: first {first:.1f}s, cached rerun {rerun:.1f}s", flush=True)
    finally:
        if server is not None:
            server.stop()
    rows = [(name, *(median(run[i] for run in runs) for i in range(4))) for name, runs in times.items()]
    base_first, base_rerun = next((r[1], r[2]) for r in rows if r[0] == "path")
    print(
        f"\n| workdir, releases_root | first run (s) | cached rerun (s) | rerun / first | first vs path | rerun vs path "
        f"| load before (first, rerun) |   (medians of {args.rounds} round(s))"
    )
    print("|---|---|---|---|---|---|---|")
    for name, first, rerun, load_first, load_rerun in rows:
        print(
            f"| {name} | {first:.1f} | {rerun:.1f} | {rerun / first:.2f} | {first / base_first:.2f} "
            f"| {rerun / base_rerun:.2f} | {load_first:.2f}, {load_rerun:.2f} |"
        )
    print(f"\nruns and logs: {out}")


if __name__ == "__main__":
    main()
