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

    python bench/storage_overhead.py [--s3] [--out DIR]

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
from pathlib import Path

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
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs (default: a temp folder)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="storage-overhead-"))
    env = {**os.environ, "MMCURATE_SCRATCH": str(out / "scratch"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    variants = {
        "path": lambda home: (str(home / "work"), str(home / "releases")),
        "file://": lambda home: (f"file://{home}/work", f"file://{home}/releases"),
    }
    server = None
    if args.s3:
        endpoint, server = s3_endpoint()
        env.update(
            {
                "FSSPEC_S3_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        )
        variants["s3://"] = lambda home: (f"s3://bench/{home.name}/work", f"s3://bench/{home.name}/releases")
    rows = []
    try:
        for name, where in variants.items():
            home = out / name.strip(":/").replace("/", "") / "run"
            home.mkdir(parents=True)
            workdir, releases_root = where(home)
            config = dryrun_config(home, FIXTURES, workdir=workdir, releases_root=releases_root)
            first, load_first = timed_run(config, env, home / "first.log")
            rerun, load_rerun = timed_run(config, env, home / "rerun.log")
            rows.append((name, first, rerun, load_first, load_rerun))
            print(f"{name}: first {first:.1f}s, cached rerun {rerun:.1f}s", flush=True)
    finally:
        if server is not None:
            server.stop()
    base_first, base_rerun = rows[0][1], rows[0][2]
    print(
        "\n| workdir, releases_root | first run (s) | cached rerun (s) | rerun / first | first vs path | rerun vs path "
        "| load before (first, rerun) |"
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
