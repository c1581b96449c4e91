"""Typed configuration: one YAML file per pipeline setting, overridable from the environment.

Precedence, highest first: keyword overrides, ``MMCURATE_*`` environment variables
(nested with ``__``, e.g. ``MMCURATE_DEFLECTIONBENCH__K_MIN=3``), then the YAML file.
Relative paths in the file are resolved against the file's own directory.
Secrets never live here: a model names the environment variable or Prefect Secret
block that holds its key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from .errors import ConfigError
from .specs import (
    Descriptor,
    EntailmentSpec,
    GraderSpec,
    ImageEncoderSpec,
    CrossModalSpec,
    KBSpec,
    LabellerSpec,
    Lexical,
    MiniLM,
    RerankerSpec,
    TextEncoderSpec,
    WikiOffline,
    model_names,
)


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
    # embedded: which packaged GGUF the local llama.cpp server loads
    gguf: Literal["smollm2", "gemma3-270m"] | None = None
    n_ctx: int = 2048
    # scripted: JSONL rules and the fallback answer
    script: Path | None = None
    default: str | None = None
    # vllm offline: extra engine arguments (tensor_parallel_size, max_model_len, ...)
    engine_args: dict[str, Any] = Field(default_factory=dict)
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
            "model": self.model or self.gguf or (str(self.script) if self.script else ""),
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


class GatingConfig(_Strict):
    pool: list[str]  # ordered keys of Settings.models
    rule: Literal["all_incorrect", "none_correct"] = "all_incorrect"


class DeflectionBenchConfig(_Strict):
    sources: list[SourceSpec]
    gating: GatingConfig
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    k_min: int = 5
    seed: int = 0
    version: str = "1.0.0"
    source_mix: dict[str, tuple[float, float]] = Field(default_factory=dict)


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
    text_entailment: EntailmentSpec = Lexical()
    image_entailment: str | None = None  # a vision model name; None: image citations skipped
    seed: int = 0
    version: str = "1.0.0"


class TaskRunnerConfig(_Strict):
    kind: Literal["threads", "dask", "ray"] = "threads"
    address: str | None = None  # existing cluster; None starts a local one
    workers: int = 2
    shard_size: int = 256


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

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, YamlConfigSettingsSource(settings_cls)

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
        names = set(self.models)
        wanted: list[str] = []
        if self.judge.model:
            wanted.append(self.judge.model)
        if self.deflectionbench:
            wanted += self.deflectionbench.gating.pool
        if self.reflvqa:
            r = self.reflvqa
            wanted += r.inspectors + ([r.image_entailment] if r.image_entailment else [])
            for spec in (r.evaluator, r.factcheck_model, r.text_entailment):
                wanted += model_names(spec)
        missing = sorted(set(wanted) - names)
        if missing:
            raise ValueError(f"unknown model(s) {missing}; defined: {sorted(names)}")
        return self

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

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined: {sorted(self.models)}") from None

    @property
    def response_cache_url(self) -> str:
        return self.cache_url or f"sqlite:///{(self.workdir / 'responses.sqlite').resolve()}"

    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration as plain JSON-able data (for manifests)."""
        return self.model_dump(mode="json")


def _resolve_paths(obj: Any, base: Path) -> Any:
    if isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            value = getattr(obj, name)
            new = _resolve_paths(value, base)
            if new is not value:
                object.__setattr__(obj, name, new)
        return obj
    if isinstance(obj, Path):
        obj = obj.expanduser()
        return obj if obj.is_absolute() else (base / obj).resolve()
    if isinstance(obj, list):
        return [_resolve_paths(v, base) for v in obj]
    if isinstance(obj, dict):
        return {k: _resolve_paths(v, base) for k, v in obj.items()}
    return obj


def load_config(path: Path | str, **overrides: Any) -> Settings:
    """Load ``path`` (YAML) with environment overrides; raise ConfigError with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        yaml.safe_load(path.read_text())
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
    return _resolve_paths(resolved, path.parent.resolve())
