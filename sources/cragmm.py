"""CRAG-MM (KDD Cup 2025, the benchmark CRUISE reports on): the public single-turn and
multi-turn sets, one sample per turn.

Published layout (``crag-mm-2025/crag-mm-single-turn-public`` and
``crag-mm-2025/crag-mm-multi-turn-public`` on the Hugging Face Hub, release v0.1.2; dataset
cards and facebookresearch/CRAG-MM ``docs/dataset.md``): Parquet shards
``data/<split>-0000k-of-0000n.parquet`` (splits ``validation``, earlier also ``public_test``),
one row per conversation (session) with

- ``session_id`` (string);
- ``image``: an Image struct ``{bytes, path}``, or null when the image is only linked;
- ``image_url``: the link, empty when ``image`` is given ("either image or image_url is
  guaranteed"); the evaluator counts a conversation as egocentric when it has no URL
  (facebookresearch/CRAG-MM ``evaluation/evaluator.py``: ``is_ego = image_url is None``);
- ``turns``: a dictionary of columns (v0.1.2; v0.1.1 stored a list of dicts, which is read
  too): ``interaction_id``, ``domain``, ``query_category``, ``dynamism``, ``query``,
  ``image_quality``, one entry per turn, the four labels integer-coded (ClassLabel);
- ``image_quality`` may instead sit on the conversation: the starter kit's iterator reads it
  there (crag-mm-2025 starter kit ``crag_batch_iterator.py``, ``CRAGTurnBatchIterator``:
  ``image_quality = conversation.get("image_quality", None)``, one value for every turn; its
  ``docs/dataset.md`` for v0.1.1 lists ``image_quality`` beside ``image_url``). A turn's own
  value is read first, else the conversation's;
- ``answers``: a dictionary of columns ``interaction_id``, ``ans_full``; ``interaction_id``
  aligns each answer with its turn.

Label names come from the shard itself, as the official tools read them through ``datasets``:
a shard written by ``datasets`` (as the Hub's are) carries its features in the Parquet schema's
``huggingface`` metadata (``{"info": {"features": ...}}``; ``datasets.Features.arrow_schema``),
where each label is a ``ClassLabel`` with its ``names`` in code order, nested in the ``turns``
columns (``{"feature": {"names": [...], "_type": "ClassLabel"}, "_type": "List"}``, or
``"Sequence"`` in datasets before 4). Only a label the shard names no ClassLabel for falls back
to the published list, the dataset card's ``dataset_info`` (``crag-mm-multi-turn-public`` README
before v0.1.2, identical in the single-turn card): ``DOMAINS``, ``CATEGORIES``, ``DYNAMISMS``,
``QUALITIES`` below. A label stored as its name (not a code) must be one of the names.

Images given only by URL are looked up where the starter kit caches its downloads
(``utils.download_image_url``: ``<md5(url)><extension>`` in ``CRAG_CACHE_DIR``; the older
``crag_image_loader.ImageLoader``: ``<sha256(url)>.<extension>``): the source's ``images``
folder, or ``image_cache/`` under the root. Nothing is downloaded.

Which set a shard belongs to is read from its path (``single-turn`` / ``multi-turn`` in a
folder name, as the Hub repositories are named), else from the ``set`` option.

One sample per turn: ``source_id`` is the turn's ``interaction_id``, ``meta`` holds the set,
``session_id``, the turn's index and the conversation's length, the four labels by name,
``egocentric``, ``image_url`` and the split. A conversation is one unit: if any of its turns is
unusable (no answer for it, an empty query, a label code or name outside its ClassLabel's names,
no image_quality on the turn or the conversation, its image unusable) the whole conversation is
quarantined with the reason, since a later turn is asked with the earlier ones in context and
the multi-turn score reads them in order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.plural import counted
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter

SINGLE, MULTI = "single_turn", "multi_turn"
DOMAINS = (
    "animal",
    "other",
    "shopping",
    "book",
    "general object recognition",
    "local",
    "vehicle",
    "plants and gardening",
    "style and fashion",
    "food",
    "text understanding",
    "sports and games",
    "math and science",
)
CATEGORIES = ("reasoning", "simple-knowledge", "comparison", "simple-recognition", "multi-hop", "aggregation")
DYNAMISMS = ("fast-changing", "static", "slow-changing", "real-time")
QUALITIES = ("rotated", "truncated", "occluded", "low light", "blurred", "normal")
LABELS = {"domain": DOMAINS, "query_category": CATEGORIES, "dynamism": DYNAMISMS, "image_quality": QUALITIES}
REQUIRED = ("session_id", "image", "image_url", "turns", "answers")
BATCH_ROWS = 32
CACHE_FOLDER = "image_cache"


class CragMMOptions(AdapterOptions):
    set: Literal["single_turn", "multi_turn"] | None = None  # for shards whose path names neither


def shard_set(path: Path, default: str | None) -> str | None:
    """The set a shard belongs to, by its path (see the module docstring)."""
    parts = "/".join(path.parts).lower()
    if "multi-turn" in parts or "multi_turn" in parts:
        return MULTI
    if "single-turn" in parts or "single_turn" in parts:
        return SINGLE
    return default


def split_of(path: Path) -> str:
    """``validation`` of ``validation-00000-of-00001.parquet``."""
    return path.stem.split("-")[0]


def _columns(value: Any, what: str) -> list[dict[str, Any]]:
    """Turns or answers as a list of dicts, from a dictionary of columns (v0.1.2) or a list (v0.1.1)."""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{what} is neither a dictionary of columns nor a list of records")
    lengths = {len(v) if isinstance(v, list) else -1 for v in value.values()}
    if len(lengths) != 1 or -1 in lengths:
        raise ValueError(f"{what}: columns of different lengths")
    n = lengths.pop()
    return [{k: v[i] for k, v in value.items()} for i in range(n)]


Names = dict[str, tuple[str, ...]]  # label field -> its ClassLabel names, in code order


def _class_labels(node: Any, key: str, out: Names) -> None:
    """Every ClassLabel of a ``datasets`` features dict, by the name of the field holding it."""
    if not isinstance(node, dict):
        return
    if node.get("_type") == "ClassLabel" and isinstance(node.get("names"), list):
        out[key] = tuple(str(n) for n in node["names"])
    elif "_type" in node and "feature" in node:  # List / Sequence of a feature
        _class_labels(node["feature"], key, out)
    else:
        for name, child in node.items():
            _class_labels(child, name, out)


def label_names(schema: pa.Schema) -> Names:
    """The names of each label, from the shard's ``huggingface`` features where it has them,
    else the published list (module docstring)."""
    found: Names = {}
    raw = (schema.metadata or {}).get(b"huggingface")
    if raw:
        try:
            _class_labels(json.loads(raw).get("info", {}).get("features", {}), "", found)
        except (ValueError, AttributeError):
            found = {}
    return {field: found.get(field, published) for field, published in LABELS.items()}


def _label(value: Any, field: str, names: tuple[str, ...]) -> str:
    """A label's name: a code into ``names``, or a name among them."""
    if isinstance(value, str) and value.strip() in names:
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(names):
        raise ValueError(
            f"{field} {'code ' if not isinstance(value, str) else ''}{value!r} is not one of the {len(names)} labels"
        )
    return names[value]


class CragMMSource(SourceAdapter):
    name = "cragmm"
    Options = CragMMOptions
    options: CragMMOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shards = sorted(p for p in self.root.rglob("*.parquet") if CACHE_FOLDER not in p.parts)
        if not self.shards:
            raise SourceError(f"cragmm: no *.parquet shards under {self.root}")
        unknown = [str(p.relative_to(self.root)) for p in self.shards if shard_set(p, self.options.set) is None]
        if unknown:
            raise SourceError(
                f"cragmm: cannot tell whether {unknown[0]} is single- or multi-turn: "
                "keep the Hub folder names (crag-mm-single-turn-public, ...) or give option set "
                "(ingest --option set=single_turn|multi_turn; in a config, options: {set: ...})"
            )
        self.cache = self.images or self.root / CACHE_FOLDER

    def source_files(self) -> list[Path]:
        return list(self.shards)

    def count_records(self) -> int | None:
        """None: a shard's footer counts conversations, and a conversation holds 1 to 6 turns."""
        return None

    def records(self) -> Iterator[Located | Rejected]:
        for shard in self.shards:
            label = str(shard.relative_to(self.root))
            which = shard_set(shard, self.options.set)
            assert which is not None  # checked in __init__
            row_number = 0
            seen: set[str] = set()
            try:
                parquet = pq.ParquetFile(shard)
                names = label_names(parquet.schema_arrow)
                for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                    missing = [c for c in REQUIRED if c not in batch.schema.names]
                    if missing:
                        yield Rejected(
                            label, f"shard skipped: it lacks {counted(len(missing), 'column')}: {', '.join(missing)}"
                        )
                        break
                    for row in batch.to_pylist():
                        yield from self._conversation(f"{label}:{row_number}", row, which, split_of(shard), seen, names)
                        row_number += 1
            except (pa.ArrowException, OSError) as exc:
                yield Rejected(f"{label}:{row_number}", f"unreadable Parquet data, rest of shard skipped: {exc}")

    def _conversation(
        self, locator: str, row: dict[str, Any], which: str, split: str, seen: set[str], names: Names
    ) -> Iterator[Located | Rejected]:
        raw = _describe(row)
        session = row.get("session_id")
        if not isinstance(session, str) or not session.strip():
            yield Rejected(locator, "missing session_id", raw)
            return
        if session in seen:
            yield Rejected(locator, f"duplicate session_id {session!r}", raw)
            return
        seen.add(session)
        try:
            turns = _columns(row.get("turns"), "turns")
            answers = {a.get("interaction_id"): a.get("ans_full") for a in _columns(row.get("answers"), "answers")}
            if not turns:
                raise ValueError("no turns")
            if which == SINGLE and len(turns) != 1:
                raise ValueError(f"a single-turn conversation with {counted(len(turns), 'turn')}")
            parsed = [self._turn(n, turn, answers, names, row.get("image_quality")) for n, turn in enumerate(turns)]
        except ValueError as exc:
            yield Rejected(locator, f"conversation {session}: {exc}", raw)
            return
        url = row.get("image_url") or None
        try:
            image = self._image(row.get("image"), url)
        except ImageRejected as exc:
            yield Rejected(locator, f"conversation {session}: {exc}", raw)
            return
        for n, (interaction, query, answer, labels) in enumerate(parsed):
            yield Located(
                f"{locator}/turn{n}",
                Sample(
                    source=self.name,
                    source_id=interaction,
                    question=query,
                    answers=[answer],
                    images=[image],
                    meta={
                        "set": which,
                        "session_id": session,
                        "turn": n,
                        "turns": len(parsed),
                        "interaction_id": interaction,
                        **labels,
                        "egocentric": url is None,
                        "image_url": url,
                        "split": split,
                    },
                ),
            )

    @staticmethod
    def _turn(
        n: int, turn: dict[str, Any], answers: dict[Any, Any], names: Names, conversation_quality: Any
    ) -> tuple[str, str, str, dict[str, str]]:
        interaction = turn.get("interaction_id")
        if not isinstance(interaction, str) or not interaction.strip():
            raise ValueError(f"turn {n} has no interaction_id")
        query = turn.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"turn {n} ({interaction}) has an empty query")
        answer = answers.get(interaction)
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError(f"turn {n} ({interaction}) has no answer")
        values = {field: turn.get(field) for field in LABELS}
        if values["image_quality"] is None:  # the starter kit reads it on the conversation
            values["image_quality"] = conversation_quality
        if values["image_quality"] is None:
            raise ValueError(f"turn {n} ({interaction}) has no image_quality, nor has its conversation")
        return (
            interaction,
            query.strip(),
            answer.strip(),
            {field: _label(values[field], field, names[field]) for field in LABELS},
        )

    def _image(self, value: Any, url: str | None) -> str:
        """The conversation's image: embedded bytes, else the cached download of its URL."""
        if isinstance(value, dict) and value.get("bytes"):
            try:
                return self.store.put(value["bytes"])
            except ImageRejected as exc:
                raise ImageRejected(f"image: {exc}") from None
        if url:
            for name in _cache_names(url):
                if (self.cache / name).is_file():
                    try:
                        return self.store.put_file(self.cache, name)
                    except ImageRejected as exc:
                        raise ImageRejected(f"image of {url}: {exc}") from None
            raise ImageRejected(f"image only by URL and not in the image cache {self.cache} ({url})")
        raise ImageRejected("no image and no image_url")


def _cache_names(url: str) -> list[str]:
    """Where the starter kit's two image loaders cache a URL's download (see the module docstring)."""
    ext = Path(url.split("?")[0]).suffix or ".jpg"
    return [
        f"{hashlib.md5(url.encode()).hexdigest()}{ext}",
        f"{hashlib.sha256(url.encode()).hexdigest()}.{url.split('.')[-1].lower()}",
    ]


def _describe(row: dict[str, Any]) -> str:
    """The conversation for quarantine, image bytes replaced by their length."""
    image = row.get("image")
    shown = {
        **row,
        "image": {"bytes": f"<{len(image['bytes'] or b'')} bytes>", "path": image.get("path")}
        if isinstance(image, dict)
        else image,
    }
    return json.dumps(shown, ensure_ascii=False, default=str)
