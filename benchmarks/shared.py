"""Settings models two benchmarks share, so that no benchmark's module imports another's: the
prompt-template file (DeflectionBench's prompts; CRUISE's summary prompt on CRAG-MM extends
it), the evaluated model's decoding (DeflectionBench's; RefLVQA's ``Generation`` extends it) and
Kestrel's claim gate (POPE's Kestrel loop; RefLVQA's claim-level verification)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from mmcurate.core.config import StrictModel, safe_yaml
from mmcurate.core.errors import ConfigError

PromptName = Literal[
    "parametric",
    "evidence",
    "best_guess",
    "eval_system",
    "abstention_none",
    "abstention_soft",
    "abstention_moderate",
    "abstention_severe",
]


class PromptFile(StrictModel):
    """DeflectionBench's prompt templates from a YAML file mapping template names
    (gating/prompts.py) to their text; a name left out keeps its built-in text. A subclass
    names other templates (``templates``' keys), e.g. CRUISE's image summary.

    Written in a config as the file's path. ``load_config`` reads the file and keeps its
    ``templates`` and ``sha256`` here, so the resolved config (and a release's manifest)
    holds the exact wording a run used, and a re-curation needs no copy of the file."""

    file: Path
    sha256: str | None = None
    templates: dict[PromptName, str] | None = None  # None until the file is read

    @model_validator(mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return {"file": value} if isinstance(value, (str, Path)) else value

    @field_validator("templates")
    @classmethod
    def _texts(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        empty = sorted(name for name, text in (value or {}).items() if not text.strip())
        if empty:
            raise ValueError(f"empty prompt {'template' if len(empty) == 1 else 'templates'} {empty}")
        return value

    def read_at(self, where: str) -> Self:
        """``read``, its one-line error naming the setting ``where`` (``deflectionbench.prompts``)."""
        try:
            return self.read()
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def read(self) -> Self:
        """This spec with the file's templates and sha256 (unchanged if they are already here)."""
        if self.templates is not None:
            return self
        try:
            raw = self.file.read_bytes()
            data = safe_yaml(raw)
        except OSError as exc:
            raise ConfigError(f"prompt templates {self.file}: {exc.strerror}") from None
        except ConfigError as exc:
            raise ConfigError(f"prompt templates {self.file}: {exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"prompt templates {self.file} is not valid YAML: {exc}".replace("\n", " ")) from None
        if not isinstance(data, dict):
            raise ConfigError(f"prompt templates {self.file}: expected a mapping of template names to text")
        try:
            return type(self)(file=self.file, sha256=hashlib.sha256(raw).hexdigest(), templates=data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"prompt templates {self.file}: {where}: {first['msg']}") from None


class Decoding(StrictModel):
    """The evaluated model's sampling in a DeflectionBench evaluation (seed 003, 4.1: "using top-p =
    1.0, repetition penalty 1.05, and temperature 0.2"). ``override: true`` answers with these values
    whatever an open-weight model's spec says; ``false`` keeps every model spec's own. A closed API
    keeps its model spec's own either way: "Closed-source APIs are queried with their default
    decoding settings" (4.1, L560-562). ``closed_apis`` names them; None reads every ``openai``
    model without a ``base_url`` (api.openai.com) as one. The table notes say which ran and what a
    backend could not set."""

    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.05, gt=0.0, le=2.0)
    override: bool = True
    closed_apis: list[str] | None = None  # keys of Settings.models


ClaimType = Literal["existence", "colour", "count", "position"]
CLAIM_THRESHOLDS: dict[ClaimType, float] = {"existence": 0.82, "colour": 0.86, "count": 0.90, "position": 0.86}
THRESHOLD_RANGE = (0.82, 0.90)  # Kestrel's per-type thresholds lie in this range (seed 000, L137)


class ClaimGate(StrictModel):
    """Kestrel's change gate (``judging.claims``): a claim is confident at or above its type's
    threshold; at most ``max_rounds`` verification rounds, stopping after ``stable_rounds``
    supported rounds in a row. Types left out of ``thresholds`` keep their default."""

    thresholds: dict[ClaimType, float] = Field(default_factory=lambda: dict(CLAIM_THRESHOLDS))
    max_rounds: int = Field(default=3, ge=1)
    stable_rounds: int = Field(default=2, ge=1)

    @model_validator(mode="after")
    def _stable_within_max(self) -> ClaimGate:
        if self.stable_rounds > self.max_rounds:
            raise ValueError(f"stable_rounds ({self.stable_rounds}) cannot exceed max_rounds ({self.max_rounds})")
        return self

    @field_validator("thresholds")
    @classmethod
    def _paper_range(cls, value: dict[ClaimType, float]) -> dict[ClaimType, float]:
        low, high = THRESHOLD_RANGE
        bad = {k: v for k, v in value.items() if not low <= v <= high}
        if bad:
            raise ValueError(f"claim thresholds must lie in [{low}, {high}] (Kestrel), got {bad}")
        return {**CLAIM_THRESHOLDS, **value}
