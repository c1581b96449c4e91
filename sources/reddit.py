"""Reddit pushshift dumps -> RefLVQA samples: one per (image question post, long answer).

The rules are RefLVQA's (seed paper, 3.1): the post has an image, is not removed, its
title is a question and not a survey; an answer is a top-level comment by a real author
with more than 50 words and at least 3 sentences. Posts that fail a rule are not errors:
they are counted in ``skipped`` (comments in ``comments_skipped``) for the funnel report.

Two dump layouts are read, each as pairs of a submissions and a comments file joined by
``link_id``: the monthly dumps ``RS_YYYY-MM.zst`` / ``RC_YYYY-MM.zst`` and the per-subreddit
dumps ``<subreddit>_submissions.zst`` / ``<subreddit>_comments.zst`` (one subreddit's whole
history; a post's ``month`` then comes from its ``created_utc``). Flags are read through
``flag``: some dump generations write booleans and nulls as text (``"false"``, ``"null"``).

Memory stays flat in dump size: each pair streams its submissions once keeping only the
candidate posts (title, image hashes, metadata), then streams its comments joining by
``link_id``. Only the lines that can matter reach Python (``prefilter``, on by default);
``zst.read_lines`` picks them on a second core as the dump is decompressed:

- posts: only lines holding an image-host marker or ``"is_gallery"`` are looked at; of
  those, a line whose raw title plainly opens with a non-question word is counted as
  ``not_question`` unparsed, the rest are parsed. Every other non-empty line is counted as
  ``no_image`` without being touched;
- comments: each line's first ``k_id":"t3_<id>"`` is read; only the lines of candidate
  posts are parsed, plus every line without such a link (a broken line is quarantined).

Both are decided by the pickers of ``reddit_lines`` (one C pass outside the GIL over each
megabyte, while it is in the cache), so picking keeps pace with decompression. Where the C
pass was not built (no compiler), or ``MMCURATE_PURE_PICKER=1``, the same pickers run in
pure Python (``linescan_py``: the same lines picked, several times slower); the ingest's
``ingest.json`` says which ran (``reader.line_picker``).

Lines skipped this way are not validated (``prefilter=False`` parses and checks every
line); a skipped post is counted under the rule its raw line already fails. Lines are
parsed with orjson, falling back to ``json`` for what only it accepts (``NaN``, huge
integers, lone surrogates), so results and reasons are those of ``json``. A month is the
unit of parallel work: ``RedditSource.parts`` gives one part per pair, ingested into its own folder, and
``sources.ingest.merge_ingests`` joins the folders in ``dump_pairs`` order. Comments are
joined within their pair only: in monthly dumps, answers written in the month after their
post (posts of a month's last days) are not seen.

Format facts relied on, and where they are published (besides shared/SOURCES.md):

- per-subreddit files are named ``<subreddit>_submissions.zst`` / ``<subreddit>_comments.zst``
  (Watchful1/PushshiftDumps ``scripts/filter_file.py``: ``subreddits/formula1_submissions.zst``,
  ``redditdev_comments.zst``; the "top 40k subreddits as individual files" torrents are listed
  in Watchful1/PushshiftDumps issue #30), and hold the same objects as the monthly files;
- ``link_id`` is the fullname of the comment's submission and ``parent_id`` is the
  submission's for a top-level comment (same ``filter_file.py``, its field notes);
- flags written as text (``"false"``, ``"null"``) are not documented in a published schema:
  they are read tolerantly because some dump generations have them.
"""

from __future__ import annotations

import html
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import Field

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.plural import listed
from mmcurate.core.records import Rejected, Sample
from mmcurate.core.text import has_sentences

from .base import AdapterOptions, Located, SourceAdapter
from .linescan import line_scanner
from .reddit_lines import UNSURE_LINK, CommentLines, PostLines, links_to
from .zst import DEFAULT_CHUNK, DEFAULT_MAX_LINE, parse_object, read_lines

MONTHLY = re.compile(r"^R([SC])_(\d{4}-\d{2})\.zst$")
PER_SUBREDDIT = re.compile(r"^(\w+)_(submissions|comments)\.zst$")
FALSE_TEXT = frozenset({"", "null", "none", "false", "0"})  # flags some dump generations write as text
MIME_EXT = {"jpg": "jpg", "jpeg": "jpg", "png": "png", "webp": "webp"}


class RedditOptions(AdapterOptions):
    question_words: list[str] = Field(
        default_factory=lambda: ["what", "when", "where", "which", "who", "whom", "whose", "why", "how"]
    )
    survey_phrases: list[str] = Field(
        default_factory=lambda: [
            "do you",
            "what is your",
            "what's your",
            "what are your",
            "have you ever",
            "would you",
            "your favorite",
            "your favourite",
        ]
    )
    image_hosts: list[str] = Field(default_factory=lambda: ["i.redd.it"])
    image_extensions: list[str] = Field(default_factory=lambda: [".jpg", ".jpeg", ".png", ".webp"])
    min_answer_words: int = Field(default=50, ge=0)  # an answer needs strictly more words than this
    min_answer_sentences: int = Field(default=3, ge=0)
    deleted_markers: list[str] = Field(default_factory=lambda: ["[deleted]", "[removed]"])
    excluded_authors: list[str] = Field(default_factory=lambda: ["automoderator"])  # any case
    max_line_bytes: int = Field(default=DEFAULT_MAX_LINE, ge=1)
    chunk_bytes: int = Field(default=DEFAULT_CHUNK, ge=1)
    prefilter: bool = True  # False parses (and so validates) every line: slower
    pairs: list[str] | None = None  # keys of the dump pairs to read ("2023-01", "r/pics"); None: all


@dataclass(frozen=True)
class ImageRef:
    name: str  # file name under the images folder
    url: str


@dataclass(frozen=True)
class DumpPair:
    """The submissions and comments files that are joined together: one month of the
    monthly dumps, or one subreddit's whole history in the per-subreddit dumps."""

    key: str  # "2023-01" or "r/<subreddit>"
    submissions: Path | None
    comments: Path | None
    month: str | None  # a monthly pair's month; per-subreddit posts take theirs from created_utc

    @property
    def files(self) -> list[Path]:
        return [p for p in (self.submissions, self.comments) if p is not None]

    def partner_name(self) -> str:
        """The name of the file this pair lacks."""
        if self.month is not None:
            return f"R{'C' if self.comments is None else 'S'}_{self.month}.zst"
        return f"{self.key.removeprefix('r/')}_{'comments' if self.comments is None else 'submissions'}.zst"


def dump_pairs(root: Path) -> list[DumpPair]:
    """The dump pairs under ``root`` in a fixed order: months, then subreddits, each sorted."""
    monthly: dict[str, dict[str, Path]] = {}
    per_subreddit: dict[str, dict[str, Path]] = {}
    for path in sorted(root.iterdir()):
        if not path.is_file():
            continue
        if match := MONTHLY.match(path.name):
            monthly.setdefault(match[2], {})["S" if match[1] == "S" else "C"] = path
        elif match := PER_SUBREDDIT.match(path.name):
            per_subreddit.setdefault(match[1], {})["S" if match[2] == "submissions" else "C"] = path
    pairs = [DumpPair(month, f.get("S"), f.get("C"), month) for month, f in sorted(monthly.items())]
    return pairs + [DumpPair(f"r/{name}", f.get("S"), f.get("C"), None) for name, f in sorted(per_subreddit.items())]


def flag(value: Any) -> bool:
    """A Reddit flag however the dump wrote it: true/false/null as JSON or as text
    (``"false"``, ``"null"``), numbers, or a category string (``removed_by_category``)."""
    if isinstance(value, str):
        return value.strip().lower() not in FALSE_TEXT
    return bool(value)


@dataclass
class Candidate:
    """What is kept of a qualifying post while its month's comments stream past."""

    post_id: str
    title: str
    images: list[str]  # sha256 in the store
    meta: dict[str, Any]
    answered: bool = False


# --- rules -------------------------------------------------------------------------------


def clean(text: str) -> str:
    return html.unescape(text).strip()


@lru_cache(maxsize=8)
def _opening(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"(?:{'|'.join(map(re.escape, words))})\b", re.IGNORECASE)


def is_question(title: str, words: list[str]) -> bool:
    """Starts with a question word (whole word, any case) and ends with ``?``."""
    return title.endswith("?") and _opening(tuple(words)).match(title) is not None


def is_survey(title: str, phrases: list[str]) -> bool:
    lowered = title.lower().replace("\u2019", "'")
    return any(phrase in lowered for phrase in phrases)


def image_refs(post: dict[str, Any], opts: RedditOptions) -> list[ImageRef]:
    """The post's images in display order; empty when it is not an image post."""
    url = post.get("url")
    if isinstance(url, str):
        url = html.unescape(url)
        try:
            parts = urlsplit(url)
        except ValueError:  # e.g. "Invalid IPv6 URL": not a usable image URL
            parts = urlsplit("")
        if parts.hostname in opts.image_hosts and parts.path.lower().endswith(tuple(opts.image_extensions)):
            return [ImageRef(unquote(parts.path.rsplit("/", 1)[-1]), url)]
    if not flag(post.get("is_gallery")) or not isinstance(post.get("media_metadata"), dict):
        return []
    metadata: dict[str, Any] = post["media_metadata"]
    gallery = post.get("gallery_data")
    items = gallery.get("items") if isinstance(gallery, dict) else None
    order = [i.get("media_id") for i in items if isinstance(i, dict)] if isinstance(items, list) else list(metadata)
    refs = []
    for media_id in order:
        item = metadata.get(media_id) if isinstance(media_id, str) else None
        if not isinstance(item, dict) or item.get("e") != "Image":
            continue
        subtype = str(item.get("m", "")).rpartition("/")[2].lower()
        source = found if isinstance(found := item.get("s"), dict) else {}
        refs.append(ImageRef(f"{media_id}.{MIME_EXT.get(subtype, subtype)}", html.unescape(str(source.get("u", "")))))
    return refs


def post_skip_reason(post: dict[str, Any], title: str, opts: RedditOptions) -> str | None:
    """Why an image post is not a candidate (checked after the image test), or None."""
    if not is_question(title, opts.question_words):
        return "not_question"
    if is_survey(title, opts.survey_phrases):
        return "survey"
    if flag(post.get("removed_by_category")):
        return "removed"
    return None


def answer_skip_reason(comment: dict[str, Any], body: str, opts: RedditOptions) -> str | None:
    """Why a comment on a candidate is not a long-form answer, or None when it is one."""
    if comment.get("parent_id") != comment.get("link_id"):
        return "not_top_level"
    if body in opts.deleted_markers:
        return "deleted_body"
    author = str(comment.get("author", ""))
    if author in opts.deleted_markers:
        return "deleted_author"
    if author.lower() in opts.excluded_authors:
        return "excluded_author"
    if len(body.split()) <= opts.min_answer_words:
        return "too_short"
    if not has_sentences(body, opts.min_answer_sentences):
        return "few_sentences"
    return None


def as_int(value: Any) -> int:
    """``created_utc`` and friends arrive as int, float or string."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return int(float(value))


# --- adapter -----------------------------------------------------------------------------


class RedditSource(SourceAdapter):
    name = "reddit"
    Options = RedditOptions
    options: RedditOptions
    images: Path  # the root's images/ unless given

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # self.skipped counts posts that are not candidates
        self.images = self.images or self.root / "images"
        if not self.images.is_dir():
            raise SourceError(f"reddit: image folder {self.images} is not a readable directory")
        self.comments_skipped: Counter[str] = Counter()  # comments on candidates, by reason
        self.picker, self._scanner = line_scanner()
        try:
            self._posts = PostLines(
                (*(h.encode() for h in self.options.image_hosts), b'"is_gallery"'),
                self.options.question_words,
                self._scanner,
            )
        except ValueError as exc:
            raise SourceError(f"reddit: {exc}") from None
        self.pairs = dump_pairs(self.root)
        if not self.pairs:
            raise SourceError(
                f"reddit: no RS_YYYY-MM.zst/RC_YYYY-MM.zst or <subreddit>_submissions.zst/"
                f"<subreddit>_comments.zst files under {self.root}"
            )
        if self.options.pairs is not None:
            known = {pair.key: pair for pair in self.pairs}
            unknown = [key for key in self.options.pairs if key not in known]
            if unknown:
                raise SourceError(f"reddit: no dump pair {listed(unknown)} under {self.root}")
            self.pairs = [known[key] for key in dict.fromkeys(self.options.pairs)]

    @classmethod
    def parts(cls, root: Path, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One part per dump pair (``dump_pairs``), unless the options already choose pairs."""
        if "pairs" in options:
            return []
        return [(pair.key, {**options, "pairs": [pair.key]}) for pair in dump_pairs(Path(root))]

    def source_files(self) -> list[Path]:
        return [path for pair in self.pairs for path in pair.files]

    def reading(self) -> dict[str, str]:
        return {"line_picker": self.picker}

    def records(self) -> Iterator[Located | Rejected]:
        for pair in self.pairs:
            if pair.submissions is None or pair.comments is None:
                what = "month" if pair.month else "subreddit"
                yield Rejected(pair.files[0].name, f"no {pair.partner_name()} beside it: {what} cannot be joined")
                continue
            candidates: dict[bytes, Candidate] = {}
            yield from self._submissions(pair.submissions, pair.month, candidates)
            yield from self._comments(pair.comments, candidates)
            self.skipped["no_qualifying_comment"] += sum(not c.answered for c in candidates.values())

    def _submissions(self, path: Path, month: str | None, candidates: dict[bytes, Candidate]) -> Iterator[Rejected]:
        picker, reasons = (self._posts, PostLines.SKIPPED) if self.options.prefilter else (self._scanner.pick_lines, ())
        for batch in read_lines(path, picker, self.options.max_line_bytes, self.options.chunk_bytes):
            if isinstance(batch, Rejected):
                yield batch
                continue
            for reason, count in zip(reasons, batch.counts):
                if count:
                    self.skipped[reason] += count
            for lineno, _, line in batch.picks:
                locator = f"{path.name}:{lineno}"
                outcome = self._candidate(parse_object(locator, line), locator, month)
                if isinstance(outcome, Candidate):
                    key = outcome.post_id.encode("utf-8", "surrogatepass")
                    if key in candidates:  # a repeated post would replace the first one unseen
                        yield Rejected(locator, f"duplicate post id {outcome.post_id!r}")
                    else:
                        candidates[key] = outcome
                elif isinstance(outcome, Rejected):
                    yield outcome
                else:
                    self.skipped[outcome] += 1

    def _candidate(
        self, post: dict[str, Any] | Rejected, locator: str, month: str | None
    ) -> Candidate | Rejected | str:
        """A candidate, a rejection, or the reason the post is skipped."""
        if isinstance(post, Rejected):
            return post
        refs = image_refs(post, self.options)
        if not refs:
            return "no_image"
        post_id, title = post.get("id"), post.get("title")
        if not isinstance(post_id, str) or not post_id or not isinstance(title, str):
            return Rejected(locator, "submission without a string id and title", repr(post)[:500])
        title = clean(title)
        reason = post_skip_reason(post, title, self.options)
        if reason:
            return reason
        hashes = []
        for ref in refs:
            try:
                hashes.append(self.store.put_file(self.images, ref.name))
            except ImageRejected as exc:
                return Rejected(locator, f"post {post_id}: {exc}", ref.url)
        try:
            created = as_int(post.get("created_utc"))
        except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 parses as inf
            return Rejected(locator, f"post {post_id}: created_utc {post.get('created_utc')!r} is not a number")
        try:
            month = month or time.strftime("%Y-%m", time.gmtime(created))
        except (OverflowError, OSError, ValueError):
            return Rejected(locator, f"post {post_id}: created_utc {created} is not a time")
        meta = {
            "subreddit": post.get("subreddit"),
            "post_id": post_id,
            "created_utc": created,
            "post_score": post.get("score"),
            "num_comments": post.get("num_comments"),
            "image_urls": [ref.url for ref in refs],
            "over_18": flag(post.get("over_18")),
            "month": month,
        }
        preview = _preview_url(post)
        if preview:
            meta["preview_url"] = preview
        if isinstance(post.get("permalink"), str):
            meta["post_permalink"] = post["permalink"]
        return Candidate(post_id, title, hashes, meta)

    def _comments(self, path: Path, candidates: dict[bytes, Candidate]) -> Iterator[Located | Rejected]:
        picker = CommentLines(candidates, self._scanner) if self.options.prefilter else self._scanner.pick_lines
        for batch in read_lines(path, picker, self.options.max_line_bytes, self.options.chunk_bytes):
            if isinstance(batch, Rejected):
                yield batch
                continue
            for lineno, tag, line in batch.picks:
                if tag == UNSURE_LINK and not links_to(line, candidates):
                    continue
                yield from self._comment(line, f"{path.name}:{lineno}", candidates)

    def _comment(self, line: bytes, locator: str, candidates: dict[bytes, Candidate]) -> Iterator[Located | Rejected]:
        comment = parse_object(locator, line)
        if isinstance(comment, Rejected):
            yield comment
            return
        link = comment.get("link_id")
        if not isinstance(link, str) or not link.startswith("t3_"):
            yield Rejected(locator, "comment without a t3_ link_id", line.decode("utf-8", "replace"))
            return
        post = candidates.get(link[3:].encode("utf-8", "surrogatepass"))  # JSON may hold lone surrogates
        if post is not None:
            yield from self._answer(post, comment, locator)

    def _answer(self, post: Candidate, comment: dict[str, Any], locator: str) -> Iterator[Located | Rejected]:
        comment_id, body = comment.get("id"), comment.get("body")
        if not isinstance(comment_id, str) or not comment_id or not isinstance(body, str):
            yield Rejected(locator, "comment without a string id and body", repr(comment)[:500])
            return
        body = clean(body)
        reason = answer_skip_reason(comment, body, self.options)
        if reason:
            self.comments_skipped[reason] += 1
            return
        post.answered = True
        meta = {**post.meta, "comment_id": comment_id, "comment_score": comment.get("score")}
        if isinstance(comment.get("permalink"), str):
            meta["permalink"] = comment["permalink"]
        yield Located(
            locator, Sample(self.name, f"{post.post_id}/{comment_id}", post.title, [body], list(post.images), meta=meta)
        )


def _preview_url(post: dict[str, Any]) -> str | None:
    try:
        url = post["preview"]["images"][0]["source"]["url"]
    except (KeyError, IndexError, TypeError):
        return None
    return html.unescape(url) if isinstance(url, str) else None
