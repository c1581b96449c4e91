"""Reddit ingest benchmark: throughput against bare decompression, memory, months in parallel.

Writes synthetic pushshift months (submissions + comments NDJSON, mostly posts that are
not candidates, a few image questions with long answers) and prints, from this one run:

  (a) ingest MB/s of uncompressed NDJSON divided by single-stream zstd MB/s over the same
      files, at 1x and 4x size (goal >= 0.5 at 4x), for today's reader (the best of --tries
      runs of each, interleaved, so a noisy moment on a shared machine does not decide it;
      the ratio with the median ingest is printed beside it) and for the reference reader
      (the adapter as of commit REFERENCE, loaded from git history; one run);
  (b) peak RSS of the ingest at 1x and 4x, each in a fresh subprocess (goal < 400 MB, flat);
  (c) whether samples.parquet and quarantine.parquet are byte-identical to the reference's;
  (d) the speed-up of 2 worker processes over 1 ingesting the same months (one ingest per pair,
      month, then merge_ingests), and whether the merged output equals one ingest;
  (e) with --pure, the ratio of the pure-Python line picker (MMCURATE_PURE_PICKER=1; one run
      per size) beside the C picker's, and whether its outputs are byte-identical.

    python bench/ingest_reddit.py [--mb 200] [--months 4] [--tries 3] [--pure] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
REFERENCE = "5cf30db330f066c8da4c8b33a2f01505f96701be"  # the reader before whole-chunk scanning
REFERENCE_FILES = ("__init__.py", "base.py", "zst.py", "reddit.py", "ingest.py")

WORDS = (
    "the a of to and in is it that for on with as was this at by be from or an are not have but "
    "camera lens moon crater coin bronze silver cat tabby bird feather rocket engine coffee milk "
    "foam plant leaf flower temple roof bridge river mountain tool hammer clock quartz gear old "
    "photo light shadow window garden path brick gravel stone wood metal glass paint colour"
).split()
QUESTION = ["What is", "Which kind of", "Who made", "Where was", "Why does", "How old is"]
OTHER = ["My", "Look at", "Finally finished", "Found this", "Today I saw", "Check out"]
SURVEY = ["What is your favorite", "Have you ever seen", "What are your thoughts on"]
CANDIDATE_SHARE = 0.004  # of submissions; RefLVQA kept well under 1% of posts


def _text(rng: random.Random, sentences: int, words: int) -> str:
    return " ".join(" ".join(rng.choices(WORDS, k=words)).capitalize() + "." for _ in range(sentences))


def _submission(rng: random.Random, n: int, t: int, prefix: str) -> tuple[dict, str]:
    """A post and its kind: self, link, image, survey, gallery or candidate."""
    post_id = f"{prefix}{n:07x}"
    roll = rng.random()
    kind = (
        "candidate"
        if roll < CANDIDATE_SHARE
        else "gallery"
        if roll < 0.03
        else "survey"
        if roll < 0.05
        else "image"
        if roll < 0.22
        else "link"
        if roll < 0.55
        else "self"
    )
    noun = " ".join(rng.choices(WORDS, k=rng.randint(3, 9)))
    title = {"candidate": f"{rng.choice(QUESTION)} this {noun}?", "survey": f"{rng.choice(SURVEY)} {noun}?"}.get(
        kind, f"{rng.choice(OTHER)} {noun}"
    )
    url = {
        "candidate": f"https://i.redd.it/{post_id}.png",
        "image": f"https://i.redd.it/{post_id}.jpg",
        "survey": f"https://i.redd.it/{post_id}.jpg",
        "gallery": f"https://www.reddit.com/gallery/{post_id}",
        "link": f"https://www.example.com/news/{post_id}.html",
    }.get(kind, f"https://www.reddit.com/r/pics/{post_id}/")
    post = {
        "all_awardings": [],
        "allow_live_comments": False,
        "archived": False,
        "author": f"user{rng.randrange(10**6)}",
        "author_flair_css_class": None,
        "author_flair_richtext": [],
        "author_flair_text": None,
        "author_flair_type": "text",
        "author_fullname": f"t2_{rng.randrange(10**9):x}",
        "author_premium": False,
        "can_gild": True,
        "category": None,
        "content_categories": None,
        "contest_mode": False,
        "created_utc": t,
        "discussion_type": None,
        "distinguished": None,
        "domain": url.split("/")[2],
        "edited": False,
        "gilded": 0,
        "gildings": {},
        "hidden": False,
        "hide_score": False,
        "id": post_id,
        "is_created_from_ads_ui": False,
        "is_crosspostable": True,
        "is_meta": False,
        "is_original_content": False,
        "is_reddit_media_domain": kind in ("image", "candidate", "survey"),
        "is_robot_indexable": True,
        "is_self": kind == "self",
        "is_video": False,
        "link_flair_background_color": "",
        "link_flair_css_class": None,
        "link_flair_richtext": [],
        "link_flair_text": None,
        "locked": False,
        "media": None,
        "media_embed": {},
        "media_only": False,
        "name": f"t3_{post_id}",
        "no_follow": True,
        "num_comments": rng.randrange(40),
        "num_crossposts": 0,
        "over_18": False,
        "parent_whitelist_status": "all_ads",
        "permalink": f"/r/pics/comments/{post_id}/",
        "pinned": False,
        "pwls": 6,
        "quarantine": False,
        "removed_by_category": None,
        "retrieved_on": t + 600,
        "score": rng.randrange(500),
        "secure_media": None,
        "selftext": _text(rng, 4, 14) if kind == "self" else "",
        "send_replies": True,
        "spoiler": False,
        "stickied": False,
        "subreddit": "pics",
        "subreddit_id": "t5_2qh0u",
        "subreddit_subscribers": 30000000,
        "subreddit_type": "public",
        "thumbnail": "default",
        "title": title,
        "total_awards_received": 0,
        "treatment_tags": [],
        "upvote_ratio": round(rng.random(), 2),
        "url": url,
        "url_overridden_by_dest": url,
        "whitelist_status": "all_ads",
        "wls": 6,
    }
    if kind == "gallery":
        post["is_gallery"] = True
        post["gallery_data"] = {"items": [{"media_id": f"{post_id}g{i}", "id": i} for i in range(3)]}
        post["media_metadata"] = {
            f"{post_id}g{i}": {
                "status": "valid",
                "e": "AnimatedImage",
                "m": "image/gif",
                "s": {"gif": f"https://i.redd.it/{post_id}g{i}.gif"},
            }
            for i in range(3)
        }
    return post, kind


def _comment(rng: random.Random, n: int, post_id: str, body: str, t: int, prefix: str, reply: bool = False) -> dict:
    comment_id = f"{prefix}c{n:08x}"
    return {
        "all_awardings": [],
        "archived": False,
        "associated_award": None,
        "author": f"user{rng.randrange(10**6)}",
        "author_flair_background_color": None,
        "author_flair_css_class": None,
        "author_flair_richtext": [],
        "author_flair_template_id": None,
        "author_flair_text": None,
        "author_flair_type": "text",
        "author_fullname": f"t2_{rng.randrange(10**9):x}",
        "author_patreon_flair": False,
        "author_premium": False,
        "body": body,
        "can_gild": True,
        "collapsed": False,
        "collapsed_because_crowd_control": None,
        "collapsed_reason": None,
        "comment_type": None,
        "controversiality": 0,
        "created_utc": t,
        "distinguished": None,
        "edited": False,
        "gilded": 0,
        "gildings": {},
        "id": comment_id,
        "is_submitter": False,
        "link_id": f"t3_{post_id}",
        "locked": False,
        "name": f"t1_{comment_id}",
        "no_follow": True,
        "parent_id": f"t1_{prefix}c{rng.randrange(n + 1):08x}" if reply else f"t3_{post_id}",
        "permalink": f"/r/pics/comments/{post_id}/_/{comment_id}/",
        "retrieved_on": t + 600,
        "score": rng.randrange(90),
        "send_replies": True,
        "stickied": False,
        "subreddit": "pics",
        "subreddit_id": "t5_2qh0u",
        "subreddit_name_prefixed": "r/pics",
        "subreddit_type": "public",
        "top_awarded_type": None,
        "total_awards_received": 0,
        "treatment_tags": [],
        "unrepliable_reason": None,
    }


def _png(seed: int) -> bytes:
    rng = random.Random(seed)
    img = Image.new("RGB", (48, 48), tuple(rng.randrange(256) for _ in range(3)))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def generate(root: Path, target_mb: float, seed: int = 0, month: str = "2023-01") -> int:
    """Write RS_/RC_<month>.zst and their images under ``root``; return uncompressed bytes.
    Ids carry the seed, so months generated with different seeds share none."""
    rng = random.Random(seed)
    prefix = f"s{seed}"
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    pool = [_png(i) for i in range(16)]
    cctx = zstandard.ZstdCompressor(level=3, threads=2)
    total, n_post, n_comment = 0, 0, 0
    t = int(time.mktime(time.strptime(month + "-01", "%Y-%m-%d")))
    rs_target = target_mb * 1e6 * 0.35
    post_ids: list[str] = []
    candidates: list[str] = []
    with open(root / f"RS_{month}.zst", "wb") as fh, cctx.stream_writer(fh) as out:
        while total < rs_target:
            post, kind = _submission(rng, n_post, t, prefix)
            line = json.dumps(post, separators=(",", ":")).encode() + b"\n"
            out.write(line)
            total += len(line)
            n_post += 1
            t += 1
            post_ids.append(post["id"])
            if kind == "candidate":
                candidates.append(post["id"])
                (images / f"{post['id']}.png").write_bytes(pool[len(candidates) % len(pool)])
    answers = [_text(rng, 5, 14) for _ in range(64)]  # > 50 words, 5 sentences
    chatter = [_text(rng, rng.randint(1, 3), rng.randint(4, 25)) for _ in range(4096)]
    due = {post_id: 3 for post_id in candidates}  # each candidate: long answer, short one, reply
    rc_target = target_mb * 1e6
    with open(root / f"RC_{month}.zst", "wb") as fh, cctx.stream_writer(fh) as out:
        while total < rc_target or due:
            if due and rng.random() < 0.01:
                post_id = next(iter(due))
                left = due.pop(post_id) - 1
                if left:
                    due[post_id] = left
                body = answers[n_comment % len(answers)] if left == 2 else rng.choice(chatter)
                comment = _comment(rng, n_comment, post_id, body, t, prefix, reply=left == 0)
            else:
                comment = _comment(
                    rng, n_comment, rng.choice(post_ids), rng.choice(chatter), t, prefix, reply=rng.random() < 0.6
                )
            line = json.dumps(comment, separators=(",", ":")).encode() + b"\n"
            out.write(line)
            total += len(line)
            n_comment += 1
            t += 1
    return total


def raw_decompress_seconds(root: Path) -> float:
    """Time of zstandard's stream_reader alone over the dump files."""
    start = time.perf_counter()
    for path in sorted(root.glob("R[SC]_*.zst")):
        dctx = zstandard.ZstdDecompressor(max_window_size=2**31)
        with open(path, "rb") as fh, dctx.stream_reader(fh, read_across_frames=True) as reader:
            while reader.read(1 << 24):
                pass
    return time.perf_counter() - start


def reference_package(work: Path) -> Path | None:
    """The adapter package as of REFERENCE, written under ``work`` as ``ref_sources``;
    None when git history is not at hand."""
    package = work / "ref" / "ref_sources"
    package.mkdir(parents=True, exist_ok=True)
    for name in REFERENCE_FILES:
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{REFERENCE}:sources/{name}"], capture_output=True, check=False
        )
        if shown.returncode != 0:
            return None
        # the sentence splitter has moved since; the reference imports it from its new home
        (package / name).write_bytes(shown.stdout.replace(b"mmcurate.annotation.sentences", b"mmcurate.core.text"))
    return package.parent


CHILD = """
import json, resource, sys, time
reference = sys.argv[3]
if reference:
    sys.path.insert(0, reference)
    from ref_sources.ingest import ingest
else:
    from mmcurate.sources.ingest import ingest
from mmcurate.core.text import split_sentences
split_sentences("Warm up. The punkt model loads once.")  # model load is not dump throughput
start = time.perf_counter()
result = ingest("reddit", sys.argv[1], sys.argv[2])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "samples": result.samples, "quarantined": result.quarantined,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run_ingest(root: Path, out: Path, reference: Path | None = None, pure: bool = False) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(out), str(reference or "")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "MMCURATE_PURE_PICKER": "1" if pure else "0"},
    )
    if done.returncode != 0:
        sys.exit(f"ingest subprocess failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def same_outputs(a: Path, b: Path) -> bool:
    return all(digest(a / name) == digest(b / name) for name in ("samples.parquet", "quarantine.parquet"))


def _warm_worker() -> None:
    """Import and load once per worker what every month needs, so months time the work."""
    import pyarrow.parquet  # noqa: F401
    from PIL import PngImagePlugin  # noqa: F401

    from mmcurate.core.text import split_sentences
    from mmcurate.sources.reddit import RedditSource  # noqa: F401

    split_sentences("Warm up. The punkt model loads once.")


def _ready(_: int) -> int:
    time.sleep(0.5)  # every worker takes one: all are started and warm before timing
    return os.getpid()


def _month_job(job: tuple[str, str, str]) -> str:
    from mmcurate.sources.ingest import ingest

    root, key, out = job
    return str(ingest("reddit", root, out, options={"pairs": [key]}).out)


def months_in_parallel(root: Path, keys: list[str], work: Path, workers: int) -> tuple[float, Path]:
    """Wall seconds of ingesting every month with ``workers`` processes, and the merged output."""
    from mmcurate.sources.ingest import load_ingest, merge_ingests

    with multiprocessing.get_context("spawn").Pool(workers, initializer=_warm_worker) as pool:
        pool.map(_ready, range(workers), chunksize=1)
        start = time.perf_counter()
        outs = pool.map(_month_job, [(str(root), key, str(work / f"w{workers}" / key)) for key in keys], chunksize=1)
        seconds = time.perf_counter() - start
    merged = merge_ingests([load_ingest(out) for out in outs], work / f"w{workers}" / "merged")
    return seconds, merged.out


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="uncompressed MB of the 1x dump")
    parser.add_argument("--months", type=int, default=4, help="months for the parallel run, each --mb/2 MB")
    parser.add_argument(
        "--tries",
        type=_positive,
        default=3,
        help="timed runs of the decompression and of the ingest, interleaved; the best of each counts",
    )
    parser.add_argument("--pure", action="store_true", help="also time the pure-Python line picker (e)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_reddit_") as tmp:
        work = args.keep or Path(tmp)
        reference = reference_package(work)
        rows = {}
        for scale in (1, 4):
            root = work / f"x{scale}"
            t0 = time.perf_counter()
            size = generate(root, args.mb * scale, seed=scale)
            made = time.perf_counter() - t0
            packed = sum(p.stat().st_size for p in root.glob("*.zst"))
            raws, tries = [], []
            for n in range(args.tries):  # interleaved, each ingest into a fresh folder (and image store)
                raws.append(raw_decompress_seconds(root))
                tries.append(run_ingest(root, work / (f"out{scale}" if n == 0 else f"out{scale}_{n}")))
            raw = min(raws)
            stats = min(tries, key=lambda t: t["seconds"])
            stats["maxrss_kb"] = max(t["maxrss_kb"] for t in tries)
            middle = statistics.median(t["seconds"] for t in tries)
            mb = size / 1e6
            rows[scale] = (raw, stats)
            print(
                f"{scale}x: {mb:.0f} MB NDJSON ({packed / 1e6:.0f} MB zstd, generated in {made:.0f} s); "
                f"{stats['samples']} samples, {stats['quarantined']} quarantined"
            )
            print(
                f"    decompress only {mb / raw:.0f} MB/s; ingest {mb / stats['seconds']:.0f} MB/s; "
                f"ratio {raw / stats['seconds']:.2f} (best of {args.tries} each; with the median ingest "
                f"{raw / middle:.2f}); peak RSS {stats['maxrss_kb'] / 1024:.0f} MB"
            )
            if reference is not None:
                ref = run_ingest(root, work / f"ref{scale}", reference)
                same = same_outputs(work / f"out{scale}", work / f"ref{scale}")
                rows[scale] += (ref, same)
                print(
                    f"    reference reader ({REFERENCE[:7]}): ingest {mb / ref['seconds']:.0f} MB/s; "
                    f"ratio {raw / ref['seconds']:.2f}; peak RSS {ref['maxrss_kb'] / 1024:.0f} MB; "
                    f"samples.parquet and quarantine.parquet {'identical' if same else 'DIFFER'}"
                )
            if args.pure:
                pure = run_ingest(root, work / f"pure{scale}", pure=True)
                same = same_outputs(work / f"out{scale}", work / f"pure{scale}")
                rows[scale] += (pure, same)
                print(
                    f"    pure-Python picker: ingest {mb / pure['seconds']:.0f} MB/s; "
                    f"ratio {raw / pure['seconds']:.2f}; peak RSS {pure['maxrss_kb'] / 1024:.0f} MB; "
                    f"samples.parquet and quarantine.parquet {'identical' if same else 'DIFFER'} to the C picker's"
                )
        (raw1, s1, *extra1), (raw4, s4, *extra4) = rows[1], rows[4]
        ref1, ref4 = (extra1[:2], extra4[:2]) if reference is not None else ([], [])
        pure1, pure4 = (extra1[-2:], extra4[-2:]) if args.pure else ([], [])
        print(
            f"(a) ingest/decompress throughput ratio: {raw1 / s1['seconds']:.2f} at 1x, "
            f"{raw4 / s4['seconds']:.2f} at 4x (goal >= 0.5)"
            + (
                f"; reference reader {raw1 / ref1[0]['seconds']:.2f} at 1x, {raw4 / ref4[0]['seconds']:.2f} at 4x"
                if reference is not None
                else ""
            )
        )
        print(
            f"(b) peak RSS: {s1['maxrss_kb'] / 1024:.0f} MB at 1x, {s4['maxrss_kb'] / 1024:.0f} MB at 4x "
            f"(goal < 400 MB, flat)"
        )
        if reference is not None:
            print(f"(c) outputs byte-identical to the reference reader: 1x {ref1[1]}, 4x {ref4[1]}")
        else:
            print("(c) no git history here: the reference reader was not run")

        root = work / "months"
        keys = [f"2022-{m:02d}" for m in range(1, args.months + 1)]
        size = sum(generate(root, args.mb / 2, seed=10 + i, month=key) for i, key in enumerate(keys))
        one, merged_one = months_in_parallel(root, keys, work, 1)
        two, merged_two = months_in_parallel(root, keys, work, 2)
        whole = run_ingest(root, work / "months_whole")
        same = same_outputs(merged_one, merged_two) and same_outputs(merged_one, work / "months_whole")
        print(
            f"(d) {args.months} months, {size / 1e6:.0f} MB NDJSON: 1 worker {one:.1f} s, 2 workers {two:.1f} s, "
            f"speed-up {one / two:.2f}x; merged outputs identical to each other and to one ingest "
            f"({whole['seconds']:.1f} s): {same}"
        )
        if args.pure:
            print(
                f"(e) pure-Python picker: ratio {raw1 / pure1[0]['seconds']:.2f} at 1x, "
                f"{raw4 / pure4[0]['seconds']:.2f} at 4x (C picker {raw1 / s1['seconds']:.2f}, "
                f"{raw4 / s4['seconds']:.2f}); outputs identical to the C picker's: 1x {pure1[1]}, 4x {pure4[1]}"
            )


if __name__ == "__main__":
    main()
