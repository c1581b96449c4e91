"""Typed configuration: one YAML file per pipeline setting, overridable from the environment.

Precedence, highest first: keyword overrides, ``MMCURATE_*`` environment variables
(nested with ``__``, e.g. ``MMCURATE_DEFLECTIONBENCH__K_MIN=3``), then the YAML file.
A model is named in a variable by its name with every character other than a letter or a
digit written as ``_`` (shells allow no ``-`` in a variable name), in any case:
``MMCURATE_MODELS__SMOLLM2_WARM__MAX_TOKENS=16`` reaches the model ``smollm2-warm``.
Relative paths in the file are resolved against the file's own directory; relative paths
given in the environment against the current directory, where the user typed them.
Secrets never live here: a model names the environment variable or Prefect Secret
block that holds its key.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from .errors import ConfigError
from .specs import (
    ClaimExtractorSpec,
    CutoffSpec,
    Descriptor,
    EntailmentSpec,
    GraderSpec,
    GroundingSpec,
    Heuristic,
    ImageEncoderSpec,
    CrossModalSpec,
    KBSpec,
    LabellerSpec,
    Lexical,
    MiniLM,
    RerankerSpec,
    SegmenterSpec,
    TextEncoderSpec,
    WikiOffline,
    model_names,
)
from .visual_prompts import COLORS, MARK_TYPES, Color, MarkType


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSpec(_Strict):
    """One model as the pipeline sees it. ``name`` is its id in ledgers and caches."""

    name: str
    backend: Literal["openai", "vllm", "embedded", "scripted"]
    model: str = ""  # model id at the endpoint, e.g. "Qwen/Qwen2.5-VL-32B-Instruct"
    revision: str = "unversioned"  # part of the cache identity: bump when weights change
    base_url: str | None = None  # openai backend; None means api.openai.com
    api_key_env: str | None = None  # environment variable holding the key
    api_key_block: str | None = None  # or a Prefect Secret block name
    vision: bool = False
    temperature: float = 0.2
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    max_tokens: int = 128
    seed: int | None = 0
    concurrency: int = 4
    timeout: float = 120.0
    max_retries: int = 4
    # embedded: which packaged GGUF the local llama.cpp server loads (a chat model: the only
    # one a package ships is SmolLM2-135M-Instruct)
    gguf: Literal["smollm2"] | None = None
    n_ctx: int = 2048
    # scripted: JSONL rules and the fallback answer
    script: Path | None = None
    default: str | None = None
    # vllm offline: extra engine arguments (tensor_parallel_size, max_model_len, ...)
    engine_args: dict[str, Any] = Field(default_factory=dict)
    # a local tokenizer.json (or a folder holding one) of this model: counts its tokens, e.g. the
    # 75 answer tokens a CRAG judge sees (evaluation.crag); None: the model has no known tokenizer
    tokenizer: Path | None = None
    # cost plan (``mmcurate plan``; defaults and their sources in planning/throughput.py)
    tokens_per_second: float | None = Field(default=None, gt=0)  # per GPU, prompt + completion; None: by size
    image_tokens: int = Field(default=256, ge=0)  # prompt tokens one image costs this model
    price_input_per_mtok: float = Field(default=0.0, ge=0)  # USD per 1M prompt tokens (0: local model)
    price_output_per_mtok: float = Field(default=0.0, ge=0)  # USD per 1M completion tokens

    @model_validator(mode="after")
    def _backend_fields(self) -> "ModelSpec":
        if self.backend == "scripted" and self.script is None:
            raise ValueError(f"model {self.name}: backend scripted needs 'script'")
        if self.backend == "embedded" and self.gguf is None:
            self.gguf = "smollm2"
        if self.backend in ("openai", "vllm") and not self.model:
            raise ValueError(f"model {self.name}: backend {self.backend} needs 'model'")
        return self

    def identity(self) -> dict[str, Any]:
        """What makes two answers comparable: enters the response-cache key and manifests."""
        return {
            "name": self.name,
            "backend": self.backend,
            # a script by its file name: the path is the builder's; its content is in the cache key
            "model": self.model or self.gguf or (self.script.name if self.script else ""),
            "revision": self.revision,
            "vision": self.vision,
        }


class JudgeSpec(_Strict):
    """``lexical``: the embedded deterministic judge. ``llm``: pre-judge, then ``model``."""

    kind: Literal["lexical", "llm"] = "lexical"
    model: str | None = None  # a key of Settings.models

    @model_validator(mode="after")
    def _needs_model(self) -> "JudgeSpec":
        if self.kind == "llm" and not self.model:
            raise ValueError("judge kind llm needs 'model'")
        return self


class SourceSpec(_Strict):
    name: str  # adapter name: reddit, infoseek, evqa, webqa, mmdocrag, mragbench, viquae
    root: Path
    images: Path | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    limit: int | None = None  # curate only the first N ingested samples (dry runs, demos)


class RetrievalConfig(_Strict):
    """Stage II of DeflectionBench: what is searched, with which encoders, how it is cut."""

    text_encoder: TextEncoderSpec = MiniLM()
    image_encoder: ImageEncoderSpec = Descriptor()
    kb: KBSpec = WikiOffline()  # documents {doc_id, title, text} (see retrieval.kb)
    kb_limit: int | None = None  # use only the first N KB documents (demo speed)
    top_pages: int = 10
    top_images: int = 10
    chunk_unit: Literal["tokens", "words"] = "tokens"
    chunk_size: int = 250
    chunk_overlap: int = 32
    reranker: RerankerSpec = MiniLM()
    max_text_negatives: int = 10
    # memory for the KB's vector index (retrieval.index_plan): a KB whose vectors fit keeps the
    # in-memory flat/IVF index; a larger one gets an on-disk store and a compressed index
    memory_gb: float = Field(default=4.0, ge=0.25, le=4096)
    # pages the text encoder embeds per second, for `mmcurate plan` (default: planning.throughput)
    encoder_pages_per_second: float | None = Field(default=None, gt=0)


Rule = Literal["all_incorrect", "none_correct"]


class GatingConfig(_Strict):
    """The gating models and the two rules that read their grades (see gating/parametric.py
    for Stage I and annotation/deflectionbench/oracle.py for Stage III solvability)."""

    pool: list[str]  # ordered keys of Settings.models
    rule: Rule = "all_incorrect"  # Stage I: keep only if every model is INCORRECT without context
    oracle_rule: Rule = "all_incorrect"  # Stage III: discard only if every model is INCORRECT with gold


class DeflectionBenchConfig(_Strict):
    sources: list[SourceSpec]
    gating: GatingConfig
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    k_min: int = 5
    seed: int = 0
    version: str = "1.0.0"
    source_mix: dict[str, tuple[float, float]] = Field(default_factory=dict)


ClaimType = Literal["existence", "colour", "count", "position"]
CLAIM_THRESHOLDS: dict[str, float] = {"existence": 0.82, "colour": 0.86, "count": 0.90, "position": 0.86}
THRESHOLD_RANGE = (0.82, 0.90)  # Kestrel's per-type thresholds lie in this range (seed 000, L137)


class ClaimGate(_Strict):
    """Kestrel's change gate (``judging.claims``): a claim is confident at or above its type's
    threshold; at most ``max_rounds`` verification rounds, stopping after ``stable_rounds``
    supported rounds in a row. Types left out of ``thresholds`` keep their default."""

    thresholds: dict[ClaimType, float] = Field(default_factory=lambda: dict(CLAIM_THRESHOLDS))
    max_rounds: int = Field(default=3, ge=1)
    stable_rounds: int = Field(default=2, ge=1)

    @field_validator("thresholds")
    @classmethod
    def _paper_range(cls, value: dict[str, float]) -> dict[str, float]:
        low, high = THRESHOLD_RANGE
        bad = {k: v for k, v in value.items() if not low <= v <= high}
        if bad:
            raise ValueError(f"claim thresholds must lie in [{low}, {high}] (Kestrel), got {bad}")
        return {**CLAIM_THRESHOLDS, **value}


class SentenceVerification(_Strict):
    """RefLVQA's optional Kestrel stage (``annotation.reflvqa.verification``): typed claims from
    every fact-checkable sentence, checked by ``verifier`` against the sentence's retrieved text
    documents; a sentence's citations change only through the gate."""

    verifier: str = Field(min_length=1)  # a model of the config; replies with JSON records
    claims: ClaimExtractorSpec = Heuristic()  # 'heuristic' (rule-based stand-in) or a model name
    gate: ClaimGate = Field(default_factory=ClaimGate)


class RefLVQAConfig(_Strict):
    @field_validator("text_corpus", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    source: SourceSpec
    cross_modal_encoder: CrossModalSpec | None = None  # None skips the image-relevance filter
    distractor_images: int = 100
    relevance_top_k: int = 10
    inspectors: list[str] = Field(default_factory=list)  # text-only models
    evaluator: GraderSpec | None = None  # grades inspector answers right/wrong
    max_right_inspectors: int = 1
    factcheck_model: LabellerSpec | None = None  # marks fact-checkable sentences
    text_corpus: list[KBSpec] = Field(default_factory=lambda: [WikiOffline()])  # searched as one
    text_corpus_limit: int | None = None
    image_corpus: Path | None = None  # folder of images; None: the posts' own images
    top_text: int = 5
    top_images: int = 5
    cutoff: CutoffSpec | None = None  # cut each sentence's top_text documents before entailment
    text_entailment: EntailmentSpec = Lexical()
    image_entailment: str | None = None  # a vision model name; None: image citations skipped
    verification: SentenceVerification | None = None  # None: no claim-level verification
    seed: int = 0
    version: str = "1.0.0"


class Evaluators(_Strict):
    """Who grades RefLVQA answers, per metric: ``lexical[:<threshold>]`` (the offline
    token-overlap stand-in, named in every output) or a model name. A single string sets all three."""

    groundedness: GraderSpec = Lexical()
    completeness: GraderSpec = Lexical()
    relevance: GraderSpec = Lexical()


class RefLVQAEvalConfig(_Strict):
    """A RAG run on a RefLVQA release: retrieve ``candidates``, rerank, keep ``top_k``."""

    @field_validator("evaluators", mode="before")
    @classmethod
    def _one_for_all(cls, value: Any) -> Any:
        return {"groundedness": value, "completeness": value, "relevance": value} if isinstance(value, str) else value

    top_k: int = Field(default=5, ge=1)
    cutoff: CutoffSpec | None = None  # e.g. 'mad' (CRUISE's MAD rule) in top_k's place; None: the fixed top_k
    candidates: int = Field(default=100, ge=1)
    text_encoder: TextEncoderSpec = MiniLM()
    cross_modal_encoder: CrossModalSpec | None = None  # None: image documents are not retrievable
    reranker: RerankerSpec = MiniLM()
    doc_chars: int = Field(default=2000, ge=1)  # a document's text is cut to this for the answering model
    answer_max_tokens: int = Field(default=512, ge=1)
    evaluators: Evaluators = Field(default_factory=Evaluators)


class EvaluationConfig(_Strict):
    reflvqa: RefLVQAEvalConfig = Field(default_factory=RefLVQAEvalConfig)


class ReflectVConfig(_Strict):
    """MIRROR's ReflectV curation (seed paper 002, section 4): see flows/reflectv.py."""

    sources: list[SourceSpec]  # image QA in published layouts, and ready-made FIRE dialogues
    student: str | None = None  # answers the question (sees the image); None: only ingested dialogues
    teacher: str | None = None  # sees the ground truth, replies "Score: N" and "Feedback: ..."
    max_turns: int = Field(default=3, ge=1)  # student answers per dialogue at most
    keywords: LabellerSpec = Heuristic()  # grounding keywords: a model, or the rule-based stand-in
    rewriter: str  # rewrites teacher feedback as first-person reflection
    grounding: GroundingSpec
    segmenter: SegmenterSpec | None = None  # SAM 2 masks from the grounded points
    verifier: str  # vision model: do the marks show what the reflection names?
    colors: list[Color] = Field(default_factory=lambda: list(COLORS), min_length=1)
    mark_types: list[MarkType] = Field(default_factory=lambda: list(MARK_TYPES), min_length=1)
    rho: float = Field(default=0.75, ge=0.0, le=1.0)  # share of multi-turn chains in the release
    seed: int = 0
    version: str = "1.0.0"

    @model_validator(mode="after")
    def _student_and_teacher(self) -> "ReflectVConfig":
        if (self.student is None) != (self.teacher is None):
            raise ValueError("reflectv needs both student and teacher, or neither (ingested dialogues only)")
        return self


class TaskRunnerConfig(_Strict):
    kind: Literal["threads", "dask", "ray"] = "threads"
    address: str | None = None  # existing cluster; None starts a local one
    workers: int = 2
    shard_size: int = 256


def env_name(model: str) -> str:
    """How a model name is written in an environment variable (lower case; see the module docstring)."""
    return re.sub(r"[^0-9a-z]", "_", model.lower())


class _ModelEnv(EnvSettingsSource):
    """``MMCURATE_*`` variables, with model keys matched to the models the config defines
    (a variable's name is lower-cased and may not hold a ``-``)."""

    def __init__(self, settings_cls: type[BaseSettings], known: set[str]) -> None:
        super().__init__(settings_cls)
        self.known = known

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        models = data.get("models")
        if isinstance(models, dict):
            data["models"] = {self._model_key(key): value for key, value in models.items()}
        return data

    def _model_key(self, key: str) -> str:
        if key in self.known:
            return key
        matches = sorted(name for name in self.known if env_name(name) == env_name(key))
        if len(matches) > 1:
            raise ConfigError(f"environment variable for model {key!r} is ambiguous: models {matches}")
        return matches[0] if matches else key


BENCHMARKS = ("deflectionbench", "reflvqa", "reflectv")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MMCURATE_", env_nested_delimiter="__", extra="forbid"
    )

    workdir: Path = Path(".mmcurate")  # ingests, caches, indexes
    releases_root: Path = Path("releases")
    cache_url: str | None = None  # default: sqlite at workdir/responses.sqlite
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    task_runner: TaskRunnerConfig = Field(default_factory=TaskRunnerConfig)
    deflectionbench: DeflectionBenchConfig | None = None
    reflvqa: RefLVQAConfig | None = None
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    reflectv: ReflectVConfig | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        yaml_source = YamlConfigSettingsSource(settings_cls)
        return init_settings, _ModelEnv(settings_cls, _model_keys(init_settings(), yaml_source())), yaml_source

    @model_validator(mode="before")
    @classmethod
    def _name_models(cls, data: Any) -> Any:
        """Models are keyed by name in YAML; the key is the name unless one is given."""
        if isinstance(data, dict) and isinstance(data.get("models"), dict):
            data["models"] = {
                key: ({"name": key, **spec} if isinstance(spec, dict) else spec)
                for key, spec in data["models"].items()
            }
        return data

    @model_validator(mode="after")
    def _references(self) -> "Settings":
        wanted = [self.judge.model] if self.judge.model else []
        wanted += [name for benchmark in BENCHMARKS if getattr(self, benchmark) for _, name in self.roles(benchmark)]
        graders = self.evaluation.reflvqa.evaluators
        for spec in (graders.groundedness, graders.completeness, graders.relevance):
            wanted += model_names(spec)
        missing = sorted(set(wanted) - set(self.models))
        if missing:
            raise ValueError(f"unknown model(s) {missing}; defined: {sorted(self.models)}")
        return self

    def roles(self, benchmark: str) -> list[tuple[str, str]]:
        """(role, model name) of every model the curation of ``benchmark`` asks, in pipeline order."""
        if benchmark == "deflectionbench":
            pairs = [("gating", name) for name in self.section(benchmark).gating.pool]
            return pairs + ([("judge", self.judge.model)] if self.judge.model else [])
        if benchmark == "reflectv":
            v = self.section(benchmark)
            roles = {"student": [v.student], "teacher": [v.teacher], "keywords": model_names(v.keywords),
                     "rewriter": [v.rewriter], "pointing": model_names(v.grounding), "verifier": [v.verifier],
                     "judge": [self.judge.model]}
            return [(role, name) for role, names in roles.items() for name in names if name]
        r = self.section(benchmark)
        roles = {"inspector": r.inspectors, "evaluator": model_names(r.evaluator),
                 "factcheck": model_names(r.factcheck_model),
                 "image_entailment": [r.image_entailment] if r.image_entailment else [],
                 "text_entailment": model_names(r.text_entailment),
                 "claim_verifier": [r.verification.verifier] if r.verification else [],
                 "claim_extractor": model_names(r.verification.claims) if r.verification else []}
        return [(role, name) for role, names in roles.items() for name in names]

    def add_model(self, spec: str) -> ModelSpec:
        """Resolve ``spec``: a model defined here by name, or a YAML file holding one model
        spec (which is added under its name). Used by ``--model`` / ``--add-model``."""
        if spec in self.models:
            return self.models[spec]
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(f"model {spec!r} is neither defined in the config ({sorted(self.models)}) nor a YAML file")
        try:
            data = yaml.safe_load(path.read_text())
            model = _resolve_paths(ModelSpec(**data), path.parent.resolve())
        except (yaml.YAMLError, TypeError, ValidationError) as exc:
            raise ConfigError(f"model file {path}: {str(exc).splitlines()[0]}") from None
        if model.name in self.models and self.models[model.name] != model:
            raise ConfigError(f"model file {path} redefines model {model.name!r}")
        self.models[model.name] = model
        return model

    def section(self, benchmark: str) -> Any:
        """The config section of ``benchmark`` (e.g. ``deflectionbench``), or ConfigError."""
        section = getattr(self, benchmark, None)
        if section is None:
            raise ConfigError(f"the config has no '{benchmark}' section")
        return section

    def check_sources(self, benchmark: str) -> None:
        """Refuse, before a curation run starts, a source whose root or image folder is not a
        directory (a re-curation or an evaluation reads no source, so loading does not check)."""
        section = self.section(benchmark)
        for source in getattr(section, "sources", None) or [section.source]:
            for what, folder in (("root", source.root), ("images", source.images)):
                if folder is not None and not folder.is_dir():
                    raise ConfigError(f"{benchmark} source {source.name}: {what} {folder} is not a readable directory")

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined: {sorted(self.models)}") from None

    @property
    def response_cache_url(self) -> str:
        return self.cache_url or f"sqlite:///{(self.workdir / 'responses.sqlite').resolve()}"

    @property
    def index_dir(self) -> Path:
        """Where vector indexes and knowledge-base vector stores are kept between runs."""
        return self.workdir / "indexes"

    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration as plain JSON-able data (for manifests)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_resolved(cls, data: dict[str, Any], base: Path) -> "Settings":
        """Settings from ``resolved()`` data as a manifest records it (paths relative to the
        release folder ``base``), with environment overrides as ``load_config`` applies them."""
        try:
            settings = cls(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"recorded config: {where}: {first['msg']}") from None
        from_env = _leaves(_ModelEnv(cls, _model_keys(data))())
        return _resolve_paths(settings, base.resolve(), from_env)


def _model_keys(*sources: dict[str, Any]) -> set[str]:
    return {key for data in sources if isinstance(data.get("models"), dict) for key in data["models"]}


Location = tuple[Any, ...]


def _leaves(data: Any, at: Location = ()) -> set[Location]:
    """The locations of the values a nested dict sets (a list is one value)."""
    if isinstance(data, dict):
        return {leaf for key, value in data.items() for leaf in _leaves(value, (*at, key))}
    return {at}


def _resolve_paths(obj: Any, base: Path, from_env: set[Location] = frozenset(), at: Location = ()) -> Any:
    """Make relative paths absolute: against the current directory where the environment set
    them (``from_env``: locations of values from ``MMCURATE_*``), else against ``base``."""
    if isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            value = getattr(obj, name)
            new = _resolve_paths(value, base, from_env, (*at, name))
            if new is not value:
                object.__setattr__(obj, name, new)
        return obj
    if isinstance(obj, Path):
        obj = obj.expanduser()
        if obj.is_absolute():
            return obj
        env = any(at[:n] in from_env for n in range(1, len(at) + 1))
        return ((Path.cwd() if env else base) / obj).resolve()
    if isinstance(obj, list):
        return [_resolve_paths(v, base, from_env, (*at, i)) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return {k: _resolve_paths(v, base, from_env, (*at, k)) for k, v in obj.items()}
    return obj


def load_config(path: Path | str, **overrides: Any) -> Settings:
    """Load ``path`` (YAML) with environment overrides; raise ConfigError with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path} is not valid YAML: {exc}".replace("\n", " ")) from None

    class _FromFile(Settings):
        model_config = SettingsConfigDict(yaml_file=path)

    try:
        settings = _FromFile(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"config {path}: {where}: {first['msg']} ({exc.error_count()} error(s))") from None
    resolved = Settings.model_construct(**{k: getattr(settings, k) for k in Settings.model_fields})
    known = _model_keys(overrides, data if isinstance(data, dict) else {})
    from_env = _leaves(_ModelEnv(_FromFile, known)()) - _leaves(overrides)
    return _resolve_paths(resolved, path.parent.resolve(), from_env)
