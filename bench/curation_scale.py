"""Scale of the DeflectionBench curation itself: time per request and peak memory by size.

Writes synthetic WebQA-layout data (``WebQA_train_val.json``, ``imgs.tsv``,
``imgs.lineidx``) at each size into a temporary folder, with three scripted models whose
rules make the funnel do real work: some questions are known without context (dropped in
Stage I, by the second or the third model), most gold facts state the answer in a
phrasing one reader recognises (settled in Stage III by the first or the third model),
some do not (discarded by the gold check), and some distractors leak the answer (removed;
a few samples then fall below k_min). Each size runs the whole flow (ingest, Stages I-III,
the validated release) in a fresh subprocess on the thread runner, and prints, measured in
this one run:

    wall time of the flow per 1,000 model requests (Stage I + III, from the release's
    calls table), and the flow process's peak RSS (the largest of ``ru_maxrss`` and the
    steps' peaks below);
    per step of the flow (ingest, the spilled samples, plan, topics, Stage I-III and near-duplicates,
    draft, publish): its wall time, RSS before and after it, and its own peak RSS (``VmHWM`` after resetting it
    through ``/proc/self/clear_refs`` at the step's start), to find the step whose memory
    grows with the sample count.

The flow streams (``deflectionbench.shard_size`` = ``SHARD_SIZE`` samples at a time, each stage's
kept rows spilled to Parquet) and fits BERTopic on a seeded subsample of at most ``FIT_SAMPLE``
questions (``topics.fit_sample``; the rest assigned by BERTopic's transform): at 2k every
question is in the fit, as the paper clusters the whole pool.

Goals (issue 36): time per request at the largest size within 1.25x of the smallest; peak RSS
at the largest under 4 GB and within 1.5x of the size before it. ``--million`` runs 2k, 100k
and 1M (the issue's sizes; 1M is 18M requests, hours on a loaded 2-core machine).

    python bench/curation_scale.py [--sizes 2000 20000 100000 | --million] [--keep DIR]
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from PIL import Image

COLOURS = ["red", "green", "blue", "yellow", "purple", "orange", "black", "white"]
THINGS = ["kite", "door", "boat", "lamp", "chair", "scarf", "bicycle", "teapot", "mailbox", "umbrella"]
IMAGE_POOL = 200  # distinct small JPEGs shared by all image facts
BASE_ID = 30_000_000
NEGATIVE_TEXTS = 5
NEGATIVE_IMAGES = 3
SHARD_SIZE = 50_000  # deflectionbench.shard_size: samples per streamed shard of the curation
FIT_SAMPLE = 2_000  # deflectionbench.topics.fit_sample: BERTopic fitted on at most this many questions

CHILD = """
import functools, json, resource, sys, time
from pathlib import Path
from prefect import flow
from mmcurate.core.config import load_config
from mmcurate.flows import deflectionbench as module
from mmcurate.flows.deflectionbench.curate import deflectionbench
from mmcurate.tasks.runners import make_task_runner

STEPS = ("ingest_source", "spill_samples", "plan_run", "assign_topics", "prepare_kb", "run_stage", "deflection_draft",
         "publish_release")
stages = []

def vm(field):  # kB, from /proc/self/status
    return int(next(l.split()[1] for l in open("/proc/self/status") if l.startswith(field + ":")))

def profiled(name, call):
    @functools.wraps(call)
    def step(*args, **kwargs):
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current RSS: the peak below is this step's own
        rss, started = vm("VmRSS"), time.perf_counter()
        out = call(*args, **kwargs)
        label = type(args[0]).__name__ if name == "run_stage" else name
        stages.append({"step": label, "seconds": time.perf_counter() - started, "rss_before_kb": rss,
                       "peak_kb": vm("VmHWM"), "rss_after_kb": vm("VmRSS")})
        return out
    return step

for name in STEPS:
    setattr(module, name, profiled(name, getattr(module, name)))

@flow
def warm_up() -> None:  # starts the temporary Prefect server before the clock runs
    return None

warm_up()
start = time.perf_counter()
run = deflectionbench.with_options(task_runner=make_task_runner(load_config(sys.argv[1]).task_runner))  # as the CLI
release = Path(run(config=sys.argv[1]))
seconds = time.perf_counter() - start
manifest = json.loads((release / "manifest.json").read_text())
requests = sum(r["calls"] + r["cache_hits"] for r in manifest["statistics"]["calls"] if r["step"] == "total")
print(json.dumps({"seconds": seconds, "requests": requests, "released": manifest["counts"]["rows"]["test"],
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "stages": stages}))
"""


def _jpeg(index: int) -> bytes:
    rng = random.Random(index)
    img = Image.new("RGB", (16, 16), tuple(rng.randrange(256) for _ in range(3)))
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def _image_fact(line: int) -> dict:
    image_id = BASE_ID + line
    return {
        "image_id": image_id,
        "title": f"Photo {line}",
        "caption": f"A small photograph, number {line}.",
        "url": f"https://example.org/{image_id}.jpg",
    }


def _text_fact(guid: str, k: int, title: str, text: str) -> dict:
    return {"fact": text, "title": title, "snippet_id": f"{guid}_{k}", "url": f"https://example.org/{guid}/{k}"}


def _record(n: int) -> tuple[str, dict]:
    """One WebQA record; its class follows from ``n`` (see the module docstring)."""
    guid = f"g{n:08d}"
    colour = COLOURS[n % len(COLOURS)]
    thing = THINGS[(n // len(COLOURS)) % len(THINGS)]
    roll = (n * 7919) % 100
    code = f"K-{colour}" if roll < 20 else f"S-{colour}" if roll < 30 else f"U{n % 97}"
    question = f"What colour is the {thing} in listing {n} (code {code})?"
    if roll < 85:
        gold_text = f"The {thing} of listing {n} is painted {colour}, its owner says."
    elif roll < 93:
        gold_text = f"The {thing} of listing {n} is coloured {colour} all over."
    else:
        gold_text = f"The {thing} of listing {n} was photographed at noon."
    leaks = 4 if n % 17 == 0 else 1 if n % 5 == 0 else 0
    negatives = []
    for k in range(NEGATIVE_TEXTS):
        other = THINGS[(n + k + 1) % len(THINGS)]
        text = (
            f"A {other} in listing {n + k + 1} is painted {colour} as well."
            if k < leaks
            else f"Listing {n} also shows a {other}, sold in week {k + 1}."
        )
        negatives.append(_text_fact(guid, 10 + k, f"Listing {n + k + 1}", text))
    gold_line = n % IMAGE_POOL
    record = {
        "Guid": guid,
        "Q": f'"{question}"',
        "A": [f'"{colour}"'],
        "Qcate": "color",
        "topic": "objects",
        "split": "train",
        "txt_posFacts": [_text_fact(guid, 0, f"Listing {n}", gold_text)],
        "img_posFacts": [_image_fact(gold_line)] if n % 3 == 0 else [],
        "txt_negFacts": negatives,
        "img_negFacts": [_image_fact((gold_line + 1 + 37 * k) % IMAGE_POOL) for k in range(NEGATIVE_IMAGES)],
    }
    return guid, record


def generate(root: Path, samples: int) -> None:
    """The WebQA layout with ``samples`` records, written as a stream."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "WebQA_train_val.json", "w", encoding="utf-8") as out:
        out.write("{")
        for n in range(samples):
            guid, record = _record(n)
            out.write(("," if n else "") + json.dumps(guid) + ":" + json.dumps(record))
        out.write("}")
    offsets, position = [], 0
    with open(root / "imgs.tsv", "wb") as tsv:
        for line in range(IMAGE_POOL):
            row = f"{BASE_ID + line}\t{base64.b64encode(_jpeg(line)).decode()}\n".encode()
            offsets.append(position)
            tsv.write(row)
            position += len(row)
    (root / "imgs.lineidx").write_text("".join(f"{o}\n" for o in offsets))


def scripts(folder: Path) -> dict[str, dict]:
    """Three scripted models: a reader of "is painted", a guesser that knows K-codes, and a
    second reader of "is coloured" that also knows S-codes."""
    rules = {"vlm-reader": [], "llm-guesser": [], "vlm-second": []}
    for colour in COLOURS:
        rules["vlm-reader"].append({"when_all": ["Evidence:", f"is painted {colour}"], "answer": colour})
        rules["llm-guesser"].append({"when_all": [f"code K-{colour})"], "when_none": ["Evidence:"], "answer": colour})
        rules["vlm-second"].append({"when_all": [f"code S-{colour})"], "when_none": ["Evidence:"], "answer": colour})
        rules["vlm-second"].append({"when_all": ["Evidence:", f"is coloured {colour}"], "answer": colour})
    models = {}
    for name, lines in rules.items():
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(rule) + "\n" for rule in lines))
        models[name] = {
            "backend": "scripted",
            "script": str(path),
            "default": "Atlantis",
            "revision": "bench-1",
            "vision": name != "llm-guesser",
        }
    return models


def write_config(folder: Path, data: Path, topics: str) -> Path:
    config = {
        "workdir": str(folder / "work"),
        "releases_root": str(folder / "releases"),
        "models": scripts(folder),
        "judge": {"kind": "lexical"},
        "deflectionbench": {
            "sources": [{"name": "webqa", "root": str(data)}],
            "gating": {"pool": ["vlm-reader", "llm-guesser", "vlm-second"], "rule": "all_incorrect"},
            "k_min": 5,
            "seed": 1,
            "shard_size": SHARD_SIZE,
            "topics": {"reading": topics, "fit_sample": FIT_SAMPLE},
        },
        "task_runner": {"kind": "threads", "workers": 2},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_flow(config: Path) -> dict:
    env = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "HF_HUB_OFFLINE": "1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(config)], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        sys.exit(f"flow subprocess failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument("--million", action="store_true", help="sizes 2,000, 100,000 and 1,000,000")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--topics",
        choices=["bertopic", "source_fields"],
        default="bertopic",
        help="topics.reading: source_fields leaves out BERTopic's embedding of every question "
        "(the curation framework alone)",
    )
    args = parser.parse_args()
    sizes = [2_000, 100_000, 1_000_000] if args.million else args.sizes
    with tempfile.TemporaryDirectory(prefix="bench_curation_") as tmp:
        work = (args.keep or Path(tmp)).resolve()  # the config names its folders absolutely
        rows = []
        print(
            f"topics.reading {args.topics}"
            + (f", fit_sample {FIT_SAMPLE:,}" if args.topics == "bertopic" else "")
            + f"; shard_size {SHARD_SIZE:,}",
            flush=True,
        )
        for size in sizes:
            folder = work / f"n{size}"
            t0 = time.perf_counter()
            generate(folder / "webqa", size)
            made = time.perf_counter() - t0
            stats = run_flow(write_config(folder, folder / "webqa", args.topics))
            per_k = 1000 * stats["seconds"] / max(stats["requests"], 1)
            rss = max([stats["maxrss_kb"]] + [step["peak_kb"] for step in stats["stages"]]) / 1024
            rows.append((size, per_k, rss))
            print(
                f"{size:>9,} samples: {stats['requests']:>10,} requests, {stats['released']:,} released, "
                f"flow {stats['seconds']:.1f} s (data written in {made:.1f} s); "
                f"{per_k:.2f} s per 1k requests; peak RSS {rss:.0f} MB",
                flush=True,
            )
            for step in stats["stages"]:
                print(
                    f"    {step['step']:<18} {step['seconds']:>8.1f} s   RSS {step['rss_before_kb'] / 1024:>6.0f} -> "
                    f"{step['rss_after_kb'] / 1024:>6.0f} MB, peak {step['peak_kb'] / 1024:>6.0f} MB",
                    flush=True,
                )
        (small, small_t, _), (large, large_t, large_rss) = rows[0], rows[-1]
        print(f"time per 1k requests: {large:,} / {small:,} samples = {large_t / small_t:.2f} (goal <= 1.25)")
        if len(rows) > 1:
            before, before_rss = rows[-2][0], rows[-2][2]
            print(
                f"peak RSS: {large:,} / {before:,} samples = {large_rss / before_rss:.2f} (goal <= 1.5); "
                f"at {large:,}: {large_rss / 1024:.2f} GB (goal < 4)"
            )


if __name__ == "__main__":
    main()
