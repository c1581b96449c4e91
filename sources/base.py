"""What every raw-source adapter is: a reader that yields canonical samples or rejections.

An adapter never raises on one bad record: it yields ``Rejected`` with a locator and a
reason, and the ingest writes it to quarantine. It raises ``SourceError`` only when the
root as a whole is unusable (missing folder, no data files).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from mmcurate.core.errors import ConfigError, SourceError
from mmcurate.core.images import ImageStore
from mmcurate.core.records import Rejected, Sample


class AdapterOptions(BaseModel):
    """Options an adapter accepts; subclasses add fields. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid")


class SourceAdapter(ABC):
    name: ClassVar[str]
    Options: ClassVar[type[AdapterOptions]] = AdapterOptions

    def __init__(
        self,
        root: Path | str,
        store: ImageStore,
        images: Path | str | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise SourceError(f"{self.name}: source root {self.root} is not a readable directory")
        self.store = store
        # records that are not errors but not samples either (e.g. a Reddit post that is not
        # a question), counted per reason for the funnel; errors go to quarantine instead
        self.skipped: Counter[str] = Counter()
        self.images = Path(images) if images is not None else None
        try:
            self.options = self.Options(**(options or {}))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(
                f"{self.name} option {'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None

    @abstractmethod
    def records(self) -> Iterator[Sample | Rejected]:
        """Yield one ``Sample`` or ``Rejected`` per raw record, streaming."""

    @abstractmethod
    def source_files(self) -> list[Path]:
        """The raw files this adapter reads (for manifests: sha256 and provenance)."""

    def count_records(self) -> int | None:
        """How many raw records the root holds, counted without building samples (an upper
        bound on the samples an ingest yields, for ``mmcurate plan``); None when no cheap
        count exists for the layout."""
        return None

    def require(self, *candidates: str) -> Path:
        """The first existing file among ``candidates`` under root, or SourceError naming them."""
        for candidate in candidates:
            path = self.root / candidate
            if path.is_file():
                return path
        raise SourceError(f"{self.name}: none of {', '.join(candidates)} found under {self.root}")
