"""Reddit ingest against datatrove: the same pushshift dumps, the same RefLVQA rules, side by side.

Writes synthetic pushshift months (``RS_``/``RC_<month>.zst``, as ``bench/ingest_reddit.py``
makes them: mostly posts that are not candidates, a few image questions with long answers) and
ingests them, each run in a fresh subprocess, four ways:

- mmcurate, 1 part: ``mmcurate.sources.ingest.ingest("reddit", ...)``, what ``mmcurate ingest
  reddit ROOT --out DIR`` runs (the RefLVQA config keeps the adapter's default rules);
- mmcurate, 2 parts: what a flow's ingest does with the parts of ``RedditSource.parts`` on its
  default task runner (threads, 2 workers): one ingest per month on 2 threads (the line picker and
  the decompression run outside the GIL), then ``merge_ingests``;
- datatrove, 1 and 2 tasks: ``JsonlReader`` over the ``.zst`` files (zstd through fsspec, every
  line parsed with orjson into a ``Document``; ``read_file`` overridden for one line, see
  ``PushshiftReader``) with the rules as datatrove filters, on
  ``LocalPipelineExecutor`` (``tasks`` = ``workers`` = 1 or 2): a first pipeline keeps the
  candidate posts (image post, question title, not a survey, not removed) and writes their ids; a
  second reads the comments and keeps each top-level long answer (> 50 words, >= 3 sentences, real
  author) to a candidate of the same month (the join mmcurate makes within a dump pair). The
  filters call the rule functions of ``mmcurate.sources.reddit`` with the adapter's default
  options, so both sides decide by the same rules and the comparison is of the reading:
  mmcurate's line picker skips the lines that cannot matter unparsed, datatrove parses each.

Printed: records (dump lines) per second of each (wall time of the work, after imports and the
sentence model's load; datatrove's 2 tasks include starting its worker processes, which load
the sentence model again), peak RSS (the
process tree's resident memory summed, sampled every 50 ms, and the largest single process's
``ru_maxrss``), the ratio mmcurate / datatrove of records per second at 1 and at 2 (>= 1.0:
mmcurate ahead), whether the kept ``<post>/<comment>`` ids are equal (else the first
differences), and the load average, date and commit. mmcurate does more per kept answer than
the datatrove pipeline: it stores each candidate's image (sha256, in its image store) and writes
full sample rows to Parquet; datatrove writes the kept comments as JSON lines.

    python bench/peers/datatrove_ingest.py [--quick] [--mb 200] [--months 2] [--tries 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "bench" / "peers")]  # the benches and provenance

from ingest_reddit import _positive, generate
from provenance import commit, load

SAMPLE_MS = 50  # how often the parent samples its child's process tree


# --- the datatrove pipelines ---------------------------------------------------------------------


def _month(path: str) -> str:
    """``RS_2022-01.zst`` / ``RC_2022-01.zst`` -> ``2022-01``."""
    return Path(path).name[3:].removesuffix(".zst")


def _post_adapter(self, data: dict, path: str, id_in_file: int) -> dict:
    """A submission line as a Document: its title the text, everything else metadata."""
    return {
        "text": data.pop("title", ""),
        "id": data.pop("id", f"{path}/{id_in_file}"),
        "metadata": {**data, "month": _month(path)},
    }


def _comment_adapter(self, data: dict, path: str, id_in_file: int) -> dict:
    return {
        "text": data.pop("body", ""),
        "id": data.pop("id", f"{path}/{id_in_file}"),
        "metadata": {**data, "month": _month(path)},
    }


def _candidate_row(self, document) -> dict:
    return {"id": document.id, "month": document.metadata["month"]}


def _answer_row(self, document) -> dict:
    return {"id": f"{document.metadata['link_id'][3:]}/{document.id}", "text": document.text}


def datatrove_pipelines(root: Path, work: Path, tasks: int) -> tuple:
    """The two executors (posts, then comments depending on it), RefLVQA's rules as filters."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.filters.base_filter import BaseFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from mmcurate.sources.reddit import (
        RedditOptions,
        answer_skip_reason,
        clean,
        image_refs,
        post_skip_reason,
    )

    class PushshiftReader(JsonlReader):
        """``JsonlReader.read_file`` as published, but for one line: it iterates a line's ``media`` as
        datatrove media items before the adapter sees it, and pushshift's ``media`` is Reddit's own
        (null on most posts: "'NoneType' object is not iterable"), so it is renamed first."""

        def read_file(self, filepath: str):
            import orjson

            with self.data_folder.open(filepath, "r", compression=self.compression) as f:
                for li, line in enumerate(f):
                    with self.track_time():
                        try:
                            data = orjson.loads(line)
                        except orjson.JSONDecodeError:
                            continue
                        data["reddit_media"] = data.pop("media", None)
                        document = self.get_document_from_dict(data, filepath, li)
                    if document:
                        yield document

    class CandidatePost(BaseFilter):
        """An image post whose title is a question, not a survey, not removed (RefLVQA 3.1)."""

        name = "RefLVQA candidate post"

        def __init__(self) -> None:
            super().__init__()
            self.options = RedditOptions()

        def filter(self, doc) -> bool | tuple[bool, str]:
            if not image_refs(doc.metadata, self.options):
                return False, "no_image"
            reason = post_skip_reason(doc.metadata, clean(doc.text), self.options)
            return (False, reason) if reason else True

    class LongAnswer(BaseFilter):
        """A top-level comment by a real author, > 50 words, >= 3 sentences, on a candidate post
        of its own month (the candidates the first pipeline wrote)."""

        name = "RefLVQA long answer"

        def __init__(self, candidates: Path) -> None:
            super().__init__()
            self.options = RedditOptions()
            self.candidates_dir = candidates
            self.candidates: set[tuple[str, str]] | None = None

        def filter(self, doc) -> bool | tuple[bool, str]:
            if self.candidates is None:  # read once per task, after the posts pipeline finished
                self.candidates = set()
                for path in sorted(self.candidates_dir.glob("*.jsonl")):
                    with open(path, encoding="utf-8") as fh:
                        self.candidates.update((row["month"], row["id"]) for row in map(json.loads, fh))
            link = doc.metadata.get("link_id")
            if not isinstance(link, str) or (doc.metadata["month"], link[3:]) not in self.candidates:
                return False, "not_a_candidate"
            reason = answer_skip_reason(doc.metadata, clean(doc.text), self.options)
            return (False, reason) if reason else True

    posts = LocalPipelineExecutor(
        pipeline=[
            PushshiftReader(str(root), glob_pattern="RS_*.zst", compression="zstd", adapter=_post_adapter),
            CandidatePost(),
            JsonlWriter(
                str(work / "candidates"), output_filename="${rank}.jsonl", compression=None, adapter=_candidate_row
            ),
        ],
        tasks=tasks,
        workers=tasks,
        logging_dir=str(work / "logs_posts"),
    )
    comments = LocalPipelineExecutor(
        pipeline=[
            PushshiftReader(str(root), glob_pattern="RC_*.zst", compression="zstd", adapter=_comment_adapter),
            LongAnswer(work / "candidates"),
            JsonlWriter(str(work / "answers"), output_filename="${rank}.jsonl", compression=None, adapter=_answer_row),
        ],
        tasks=tasks,
        workers=tasks,
        logging_dir=str(work / "logs_comments"),
        depends=posts,
    )
    return posts, comments


def run_datatrove(root: Path, work: Path, tasks: int) -> tuple[float, list[str]]:
    from loguru import logger

    from mmcurate.core.text import split_sentences

    logger.remove()  # datatrove logs every step to stderr; its log files stay under work/
    split_sentences("Warm up. The punkt model loads once.")  # model load is not dump throughput
    _, comments = datatrove_pipelines(root, work, tasks)
    start = time.perf_counter()
    comments.run()  # runs its dependency, the posts pipeline, first
    seconds = time.perf_counter() - start
    ids = [
        json.loads(line)["id"]
        for path in sorted((work / "answers").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    return seconds, ids


# --- mmcurate ------------------------------------------------------------------------------------


def run_mmcurate(root: Path, work: Path, parts: int) -> tuple[float, list[str]]:
    """1: one ingest of the whole folder; 2: the flow's ingest (``tasks/ingest.py`` on its default
    thread runner, 2 workers): one ingest per part, then merged in the parts' order."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.parquet as pq

    from mmcurate.core.images import ImageStore
    from mmcurate.core.text import split_sentences
    from mmcurate.sources.ingest import ingest, merge_ingests, source_parts

    split_sentences("Warm up. The punkt model loads once.")
    start = time.perf_counter()
    if parts == 1:
        out = ingest("reddit", root, work / "out").out
    else:
        store = ImageStore(work / "images")  # one store for the parts, as a flow's workdir has

        def part(job: tuple[str, dict]) -> object:
            key, options = job
            return ingest("reddit", root, work / "parts" / key.replace("/", "_"), options=options, store=store)

        with ThreadPoolExecutor(parts) as pool:
            results = list(pool.map(part, source_parts("reddit", root)))
        out = merge_ingests(results, work / "out").out
    seconds = time.perf_counter() - start
    return seconds, pq.read_table(out / "samples.parquet", columns=["source_id"]).column(0).to_pylist()


def child(side: str, root: Path, work: Path, ways: int) -> None:
    seconds, ids = (run_mmcurate if side == "mmcurate" else run_datatrove)(root, work, ways)
    (work / "kept_ids.json").write_text(json.dumps(ids))
    largest = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    print(json.dumps({"seconds": seconds, "kept": len(ids), "largest_rss_kb": largest}))


# --- the parent ----------------------------------------------------------------------------------


def measured(side: str, root: Path, work: Path, ways: int) -> dict:
    """Run one side in a fresh subprocess; its figures, the tree's sampled peak RSS and its kept ids."""
    import psutil

    work.mkdir(parents=True)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", side, str(root), str(work), str(ways)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
    )
    peak = 0
    top = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        total = 0
        for p in tree:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        peak = max(peak, total)
        time.sleep(SAMPLE_MS / 1000)
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"{side} ({ways}) subprocess failed:\n{err[-4000:]}")
    stats = json.loads(out.strip().splitlines()[-1])
    stats["tree_rss_mb"] = peak / 2**20
    stats["ids"] = json.loads((work / "kept_ids.json").read_text())
    return stats


def dump_lines(root: Path) -> int:
    import zstandard

    lines = 0
    for path in sorted(root.glob("R[SC]_*.zst")):
        with (
            open(path, "rb") as fh,
            zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(fh, read_across_frames=True) as reader,
        ):
            while chunk := reader.read(1 << 24):
                lines += chunk.count(b"\n")
    return lines


def differences(ours: list[str], theirs: list[str]) -> str:
    if sorted(ours) == sorted(theirs):
        return f"equal ({len(ours)} ids)"
    a, b = set(ours), set(theirs)
    return (
        f"UNEQUAL: {len(ours)} vs {len(theirs)} ids; only mmcurate's: {sorted(a - b)[:5]}; "
        f"only datatrove's: {sorted(b - a)[:5]}"
        + ("; repeated ids" if len(a) < len(ours) or len(b) < len(theirs) else "")
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small run: 2 months of 10 MB")
    parser.add_argument("--mb", type=float, default=200.0, help="uncompressed MB of NDJSON per month")
    parser.add_argument("--months", type=_positive, default=2, help="months of dumps (one part each)")
    parser.add_argument(
        "--tries",
        type=_positive,
        default=2,
        help="runs of each side, interleaved; the fastest counts (the largest RSS is printed)",
    )
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--child", nargs=4, metavar=("SIDE", "ROOT", "WORK", "WAYS"), help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.child:
        side, root, work, ways = args.child
        child(side, Path(root), Path(work), int(ways))
        return
    mb = 10.0 if args.quick else args.mb
    tries = 1 if args.quick else args.tries
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}, load {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_peers_ingest_") as tmp:
        work = (args.keep or Path(tmp)).resolve()
        root = work / "dumps"
        t0 = time.perf_counter()
        size = sum(generate(root, mb, seed=20 + i, month=f"2022-{i + 1:02d}") for i in range(args.months))
        records = dump_lines(root)
        print(
            f"{args.months} months, {size / 1e6:.0f} MB NDJSON, {records:,} records "
            f"({sum(p.stat().st_size for p in root.glob('*.zst')) / 1e6:.0f} MB zstd; written in "
            f"{time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
        best: dict[tuple[str, int], dict] = {}
        for n in range(tries):
            for ways in (1, 2):
                for side in ("mmcurate", "datatrove"):
                    stats = measured(side, root, work / f"{side}{ways}_{n}", ways)
                    label = f"{side} {ways} {'part' if side == 'mmcurate' else 'task'}{'s' if ways > 1 else ''}"
                    print(
                        f"    try {n + 1}: {label:<18} {stats['seconds']:7.2f} s, {records / stats['seconds']:>10,.0f} "
                        f"records/s, peak RSS {stats['tree_rss_mb']:.0f} MB (tree), "
                        f"{stats['largest_rss_kb'] / 1024:.0f} MB (largest process), {stats['kept']} kept; "
                        f"load {load()}",
                        flush=True,
                    )
                    kept = best.get((side, ways))
                    if kept is None or stats["seconds"] < kept["seconds"]:
                        stats["tree_rss_mb"] = max(stats["tree_rss_mb"], kept["tree_rss_mb"] if kept else 0)
                        best[(side, ways)] = stats
                    else:
                        kept["tree_rss_mb"] = max(stats["tree_rss_mb"], kept["tree_rss_mb"])
        for ways in (1, 2):
            ours, theirs = best[("mmcurate", ways)], best[("datatrove", ways)]
            print(
                f"{ways} {'way ' if ways == 1 else 'ways'}: mmcurate {records / ours['seconds']:,.0f} records/s, "
                f"datatrove {records / theirs['seconds']:,.0f} records/s: ratio "
                f"{theirs['seconds'] / ours['seconds']:.2f} (best of {tries}); peak RSS mmcurate "
                f"{ours['tree_rss_mb']:.0f} MB, datatrove {theirs['tree_rss_mb']:.0f} MB; kept ids "
                f"{differences(ours['ids'], theirs['ids'])}"
            )
        ids = [best[key]["ids"] for key in sorted(best)]
        print(
            f"all four runs keep the same ids: {all(sorted(i) == sorted(ids[0]) for i in ids)}; "
            f"load {load()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
        )


if __name__ == "__main__":
    main()
