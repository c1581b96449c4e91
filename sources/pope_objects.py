"""POPE-style probes built from object annotations, as POPE builds its own, so a user can
probe their own images (github.com/RUCAIBox/POPE at 3df3ba1: ``main.py`` and ``utils.py``;
the published files are read by ``sources.pope``).

Annotations (``annotations``, a file under ROOT; default the first of ``objects.jsonl`` and
``instances*.json``), in one of two published layouts:

- POPE's own (README "From annotations"): JSON lines ``{"image": <file name>, "objects":
  [<object>, ...]}``, other keys ignored; an image's objects in the order given;
- a COCO instances file (``{"images": [{"id", "file_name"}], "annotations": [{"image_id",
  "category_id", "area"}], "categories": [{"id", "name"}]}``): an image's objects are the
  names of its annotated categories, largest total area first. POPE's objects file lists
  objects in an order it does not document; this order makes the first ``sample_num``, POPE's
  positives, the most visible ones.

Images are read from the source's ``images`` folder (default ``ROOT/images``).

Building (POPE's ``main`` and ``pope``): keep the images with at least ``sample_num`` (3)
objects and whose file is usable, draw ``images`` of them (all by default) with the seed,
and count over the kept images how often each object appears and how often two appear
together. Then, for every kept image and each of its first ``sample_num`` objects: a
positive probe ("yes") followed by one negative ("no"), an object neither in the image nor
already asked about it, chosen per split:

- ``random``: drawn at random from every object of the kept images;
- ``popular``: the first of the objects by frequency, most frequent first;
- ``adversarial``: the first of the objects by how often they appear with that positive;

``popular`` and ``adversarial`` fall back to a random draw when their list runs out. Ties
are broken by name (POPE leaves them to dict order). A positive for which no object is left
to ask about (a small vocabulary) is not asked either, so every split stays half "yes"
(POPE's loop would search forever); it is counted under ``skipped`` per split. One ``random.Random(seed)`` serves the
image draw and then the splits in the order above, as POPE's one global generator does.
Questions use POPE's template; ids count from 1 in each split. Each split so holds 2 x
``sample_num`` probes per image, half of them "yes".

A sample per probe, as ``sources.pope`` makes them (origin ``built``, source id
``<dataset>/<split>/<question id>``). Quarantined with their locators: an annotation line that
is not an image with a list of objects, a COCO annotation naming an unknown image or
category, an image file that is missing or does not decode (before the draw: its objects
count nowhere), and an annotations file holding no image with objects at all (one row for the
bare file: an ingest of it never ends in a silent 0). Skipped and counted (``ingest.json`` and
the console line): images with fewer than ``sample_num`` objects, positives with no object
left to ask about.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from mmcurate.core.errors import ImageRejected, SourceError
from mmcurate.core.records import Rejected

from .base import AdapterOptions, JsonLine, Located, SourceAdapter, jsonl_records
from .pope import BUILT, SPLITS, Split, probe_question, probe_sample

Objects = dict[str, list[str]]  # image file -> its objects, in order


class PopeObjectsOptions(AdapterOptions):
    annotations: str | None = None  # file under root; None: objects.jsonl, else the first instances*.json
    dataset: str = Field(default="custom", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")  # names the probes
    sample_num: int = Field(default=3, ge=1)  # positives (and negatives) per image, POPE's --sample_num
    images: int | None = Field(default=None, ge=1)  # images drawn, POPE's --img_num; None: every kept image
    seed: int = 0
    splits: list[Split] = Field(default_factory=lambda: list(SPLITS), min_length=1)


def negatives_by(split: str, positive: str, frequency: Counter[str], together: dict[str, Counter[str]]) -> list[str]:
    """The objects a negative is taken from, in POPE's order of preference for ``split``
    (empty for ``random``, which only draws)."""
    if split == "popular":
        return sorted(frequency, key=lambda o: (-frequency[o], o))
    if split == "adversarial":
        return sorted(together[positive], key=lambda o: (-together[positive][o], o))
    return []


Probe = tuple[int, str, str, str]  # question id, image, object, label


def build_probes(
    objects: Objects, sample_num: int, images: int | None, seed: int, splits: Sequence[str]
) -> tuple[dict[str, list[Probe]], Counter[str]]:
    """split -> [(question id, image, object, label)] by POPE's rules (module docstring), and
    per split the positives left unasked because no object was left to ask about."""
    rng = random.Random(seed)
    kept = sorted(image for image, found in objects.items() if len(found) >= sample_num)
    if images is not None and images < len(kept):
        kept = rng.sample(kept, images)
    frequency: Counter[str] = Counter(o for image in kept for o in objects[image])
    together: dict[str, Counter[str]] = defaultdict(Counter)
    for image in kept:
        for a in objects[image]:
            together[a].update(b for b in objects[image] if b != a)
    pool = sorted(frequency)
    out: dict[str, list[Probe]] = {}
    unasked: Counter[str] = Counter()
    for split in (s for s in SPLITS if s in splits):
        probes: list[Probe] = []
        for image in kept:
            present, asked = set(objects[image]), list[str]()
            for positive in objects[image][:sample_num]:
                taken = present | set(asked) | {positive}
                free = [o for o in negatives_by(split, positive, frequency, together) if o not in taken]
                candidates = [o for o in pool if o not in taken]
                if not candidates:
                    unasked[split] += 1  # no object left to ask about: neither probe (POPE would search forever)
                    continue
                negative = free[0] if free else rng.choice(candidates)
                asked += [positive, negative]
                probes += [(len(probes) + 1, image, positive, "yes"), (len(probes) + 2, image, negative, "no")]
        out[split] = probes
    return out, unasked


class PopeObjectsSource(SourceAdapter):
    name = "pope_objects"
    Options = PopeObjectsOptions
    options: PopeObjectsOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.options.annotations is not None:
            self.annotations = self.require(self.options.annotations)
        else:
            found = (
                [self.root / "objects.jsonl"]
                if (self.root / "objects.jsonl").is_file()
                else sorted(self.root.glob("instances*.json"))
            )
            if not found:
                raise SourceError(f"pope_objects: no objects.jsonl or instances*.json under {self.root}")
            self.annotations = found[0]
        self.image_dir = self.images or self.root / "images"

    def source_files(self) -> list[Path]:
        return [self.annotations]

    def records(self) -> Iterator[Located | Rejected]:
        objects: Objects = {}
        read = self._coco if self.annotations.suffix == ".json" else self._pope
        for item in read():
            if isinstance(item, Rejected):
                yield item
            else:
                image, found = item
                objects.setdefault(image, [])
                objects[image] += [o for o in found if o not in objects[image]]
        if not any(objects.values()):
            yield Rejected(self.annotations.name, "no image with objects in the annotations file: nothing to probe")
            return
        usable: Objects = {}
        stored: dict[str, str] = {}
        for image, found in sorted(objects.items()):
            if len(found) < self.options.sample_num:
                self.skipped[f"fewer than {self.options.sample_num} objects"] += 1
                continue
            try:
                stored[image] = self.store.put_file(self.image_dir, image)
            except ImageRejected as exc:
                yield Rejected(f"{self.annotations.name}:{image}", str(exc), image)
                continue
            usable[image] = found
        opts = self.options
        built, unasked = build_probes(usable, opts.sample_num, opts.images, opts.seed, opts.splits)
        for split, count in unasked.items():
            self.skipped[f"{split}: positive with no object left to ask about"] += count
        for split, probes in built.items():
            for question_id, image, name, label in probes:
                sample = probe_sample(
                    self.store,
                    self.name,
                    opts.dataset,
                    split,
                    question_id,
                    self.image_dir,
                    image,
                    probe_question(name),
                    label,
                    BUILT,
                )
                yield Located(f"{self.annotations.name}:{split}/{question_id}", sample)

    def _pope(self) -> Iterator[tuple[str, list[str]] | Rejected]:
        for item in jsonl_records(self.annotations, "malformed annotation"):
            if not isinstance(item, JsonLine):
                yield item
                continue
            image, found = item.record.get("image"), item.record.get("objects")
            if not (
                isinstance(image, str)
                and image.strip()
                and isinstance(found, list)
                and all(isinstance(o, str) and o.strip() for o in found)
            ):
                yield Rejected(item.locator, "malformed annotation: needs image and a list of objects", item.raw)
                continue
            yield image.strip(), [o.strip() for o in found]

    def _coco(self) -> Iterator[tuple[str, list[str]] | Rejected]:
        name = self.annotations.name
        try:
            data = json.loads(self.annotations.read_text(encoding="utf-8-sig"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceError(f"pope_objects: {name} is not a JSON file: {exc}") from None
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), list) for k in ("images", "annotations", "categories")
        ):
            raise SourceError(f"pope_objects: {name} is not a COCO instances file (images, annotations, categories)")
        files = {i.get("id"): i.get("file_name") for i in data["images"] if isinstance(i, dict)}
        names = {c.get("id"): c.get("name") for c in data["categories"] if isinstance(c, dict)}
        area: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for index, ann in enumerate(data["annotations"]):
            ann = ann if isinstance(ann, dict) else {}
            image, category = files.get(ann.get("image_id")), names.get(ann.get("category_id"))
            if not isinstance(image, str) or not isinstance(category, str):
                yield Rejected(
                    f"{name}:annotations[{index}]",
                    "annotation names an unknown image or category",
                    json.dumps(ann)[:500],
                )
                continue
            size = ann.get("area")
            area[image][category] += (
                float(size) if isinstance(size, (int, float)) and not isinstance(size, bool) else 0.0
            )
        for image, by_category in sorted(area.items()):
            yield image, sorted(by_category, key=lambda c: (-by_category[c], c))
