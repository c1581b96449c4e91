"""ChartQA: questions about real-world charts (ReflectV's Chart domain).

Layout read (github.com/vis-nlp/ChartQA, ``README.md``, "ChartQA Dataset" folder; the
same tree is on the Hub as ``ahmed-masry/ChartQA``):

- ``ROOT/<split>/<split>_human.json`` (human-authored questions) and
  ``ROOT/<split>/<split>_augmented.json`` (machine-generated), splits ``train``, ``val``,
  ``test``: each ONE JSON array of ``{"imgname", "query", "label"}`` (keys as read by the
  ChartQA evaluation loops, e.g. ``entry["imgname"]``, ``entry["query"]``,
  ``entry["label"]``);
- the chart images at ``ROOT/<split>/png/<imgname>``.

Records have no id of their own: a sample's source id is ``<split>/<subset>/<index in
the file>``, stable as long as the published file is. Option ``subsets`` picks human,
augmented or both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from mmcurate.core.domains import CHART
from mmcurate.core.errors import SourceError
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, text_field
from .image_qa import array_records, count_objects, guarded, image_qa_sample

Split = Literal["train", "val", "test"]
Subset = Literal["human", "augmented"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")
SUBSETS: tuple[Subset, ...] = ("human", "augmented")


class ChartQAOptions(AdapterOptions):
    splits: list[Split] | None = None  # None: every split folder with at least one questions file
    subsets: list[Subset] = list(SUBSETS)


class ChartQASource(SourceAdapter):
    name = "chartqa"
    Options = ChartQAOptions
    options: ChartQAOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        wanted = [
            (split, subset)
            for split in (self.options.splits or SPLITS)
            for subset in dict.fromkeys(self.options.subsets)
        ]
        self.files = {key: self.root / key[0] / f"{key[0]}_{key[1]}.json" for key in wanted}
        if self.options.splits is None:
            self.files = {key: path for key, path in self.files.items() if path.is_file()}
        missing = [str(p.relative_to(self.root)) for p in self.files.values() if not p.is_file()]
        if missing or not self.files:
            raise SourceError(
                f"chartqa: {', '.join(missing) or 'no <split>/<split>_human.json or _augmented.json'} "
                f"missing under {self.root}"
            )

    def count_records(self) -> int:
        return sum(count_objects(array_records(path)) for path in self.files.values())

    def source_files(self) -> list[Path]:
        return list(self.files.values())

    def records(self) -> Iterator[Located | Rejected]:
        for (split, subset), path in self.files.items():
            for item in array_records(path):
                if isinstance(item, Rejected):
                    yield item
                else:
                    locator, record = item
                    index = locator[len(path.name) + 1 :]
                    yield guarded(locator, record, self._sample, split, subset, index, record)

    def _sample(self, split: str, subset: str, index: str, record: dict[str, Any]) -> Sample:
        image = text_field(record, "imgname")
        question = text_field(record, "query")
        label = text_field(record, "label", numbers=True)  # numbers are answers too ("label": 35)
        meta = {"split": split, "subset": subset}
        return image_qa_sample(
            self.store,
            self.name,
            f"{split}/{subset}/{index}",
            question,
            [label],
            self.images or self.root / split / "png",
            image,
            CHART,
            meta,
        )
