"""Typed configuration: one YAML file per pipeline setting, overridable from the environment.

Precedence, highest first: keyword overrides, ``MMCURATE_*`` environment variables
(nested with ``__``, e.g. ``MMCURATE_<SECTION>__K_MIN=3`` for a field of a benchmark's section),
then the YAML file.
A model is named in a variable by its name with every character other than a letter or a
digit written as ``_`` (shells allow no ``-`` in a variable name), in any case:
``MMCURATE_MODELS__SMOLLM2_REWRITER__MAX_TOKENS=64`` reaches the model ``smollm2-rewriter``.
Relative paths in the file are resolved against the file's own directory; relative paths
given in the environment against the current directory, where the user typed them.
Secrets never live here: a model names the environment variable or Prefect Secret
block that holds its key.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Collection, Mapping
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from . import storage
from .errors import ConfigError, MmcurateError
from .images import ImageStore
from .plural import counted, listed


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# a model's name names folders (an evaluation's ``<workdir>/evaluations/<release>/<name>``): one
# path segment of a safe alphabet; the endpoint's model id ("Qwen/Qwen2.5-VL-7B-Instruct") is ``model``
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def safe_model_name(text: str) -> str:
    """A model name (``MODEL_NAME``) for ``text``, e.g. a server's model id: every run of other
    characters written as ``_`` (``Qwen/Qwen2.5-VL-7B`` -> ``Qwen_Qwen2.5-VL-7B``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).lstrip("._-")[:128] or "model"


class ModelSpec(StrictModel):
    """One model as the pipeline sees it. ``name`` is its id in ledgers and caches."""

    name: str
    backend: Literal["openai", "vllm", "embedded", "scripted"]
    model: str = ""  # model id at the endpoint, e.g. "Qwen/Qwen2.5-VL-32B-Instruct"
    revision: str = "unversioned"  # part of the cache identity: bump when weights change
    base_url: str | None = None  # openai backend; None means api.openai.com
    api_key_env: str | None = None  # environment variable holding the key
    api_key_block: str | None = None  # or a Prefect Secret block name
    vision: bool = False
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)  # the OpenAI API's range
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.05, gt=0.0)  # 1: none (vLLM, llama.cpp)
    max_tokens: int = Field(default=128, ge=1)
    # longest side, in pixels, of an image sent to the model (a larger one is downscaled before it
    # is sent, e.g. RefLVQA's 512: seed 004, C.2); None: images as stored
    image_max_side: int | None = Field(default=None, ge=1)
    seed: int | None = Field(default=0, ge=0)  # llama.cpp reads a negative seed as "random": not reproducible
    concurrency: int = Field(default=4, ge=1)  # 0 would never send a request: the run would hang
    timeout: float = Field(default=120.0, gt=0.0)  # seconds per request
    max_retries: int = Field(default=4, ge=0)
    # embedded: which packaged GGUF the local llama.cpp server loads (a chat model: the only
    # one a package ships is SmolLM2-135M-Instruct)
    gguf: Literal["smollm2"] | None = None
    n_ctx: int = Field(default=2048, ge=1)
    # the llama.cpp server's threads; with two servers answering at once on 2 cores (make demo's
    # two chains) 1 each generated SmolLM2's tokens 1.35x as fast as 2 each (bench/llama_threads.py)
    n_threads: int = Field(default=2, ge=1, le=1024)
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
    # USD per 1M prompt / completion tokens; None: not set (a local model costs GPU-hours, not money;
    # a hosted API's cost is then unknown: planning.throughput.cost)
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)

    @field_validator("name")
    @classmethod
    def _one_path_segment(cls, value: str) -> str:
        if not MODEL_NAME.fullmatch(value):
            raise ValueError(
                f"model name {value!r} is not one folder name: letters, digits, '.', '_' and '-', "
                "starting with a letter or digit, at most 128 characters (the endpoint's model id, "
                "e.g. Qwen/Qwen2.5-VL-7B-Instruct, goes in 'model')"
            )
        return value

    @model_validator(mode="after")
    def _backend_fields(self) -> ModelSpec:
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
            # only when set: the cache keys of models sending images as stored stay what they were
            **({"image_max_side": self.image_max_side} if self.image_max_side is not None else {}),
        }


class JudgeSpec(StrictModel):
    """``lexical``: the embedded deterministic judge. ``llm``: pre-judge, then ``model``."""

    kind: Literal["lexical", "llm"] = "lexical"
    model: str | None = None  # a key of Settings.models

    @model_validator(mode="after")
    def _needs_model(self) -> JudgeSpec:
        if self.kind == "llm" and not self.model:
            raise ValueError("judge kind llm needs 'model'")
        return self


class SourceSpec(StrictModel):
    name: str  # adapter name: reddit, infoseek, evqa, webqa, mmdocrag, mragbench, viquae
    root: Path
    images: Path | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # the adapter's options, checked before a run starts
    limit: int | None = Field(default=None, ge=1)  # curate only the first N ingested samples (dry runs, demos)


# every benchmark's list of sources, one rule: an empty list is refused at load ("<benchmark>.sources:
# List should have at least 1 item"), before any run starts
Sources = Annotated[list[SourceSpec], Field(min_length=1)]


class Section(StrictModel):
    """A part of the config a benchmark registers (``register_sections``): its own section, its
    section under ``evaluation``, or another it owns. Loading checks the models it names."""

    @classmethod
    def find(cls, settings: CoreSettings) -> Self | None:
        """This section of ``settings`` as its own type, None when the file leaves it out.
        (``settings.<name>`` is untyped: ``Settings`` is built at run time from the registered
        sections, ``settings_type``.)"""
        found: Any = settings
        for part in section_name(cls).split("."):
            found = getattr(found, part, None)
        return found if isinstance(found, cls) else None

    @classmethod
    def of(cls, settings: CoreSettings) -> Self:
        """This section of ``settings`` as its own type, or ConfigError when the config has none."""
        found = cls.find(settings)
        if found is None:
            raise ConfigError(f"the config has no '{section_name(cls)}' section")
        return found

    def references(self, judge: str | None) -> list[str]:
        """The models this section names (each must be defined under ``models``); ``judge`` is
        the config's judge model, if the judge is one."""
        return []

    def check_models(self, models: Mapping[str, ModelSpec]) -> None:
        """Raise ValueError when a model it names cannot serve its role (called once every name
        is known to be defined)."""

    def read_files(self, where: str) -> None:
        """Read the files it names, once its paths are resolved; ``where`` is its config path
        (for the error)."""


class BenchmarkSection(Section):
    """A benchmark's own section of the config: its sources and the models its curation asks."""

    if TYPE_CHECKING:  # each section declares it as its own field (field order is the resolved config's)
        version: str  # the version of a curation run's release
        sources: list[SourceSpec]  # the sources its curation reads

    def sources_at(self, name: str) -> list[tuple[str, SourceSpec]]:
        """(config path, spec) of every source, e.g. ``("<name>.sources[2]", spec)``; ``name``
        is the section's name."""
        return [(f"{name}.sources[{i}]", spec) for i, spec in enumerate(self.sources)]

    @abstractmethod
    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        """(role, model name) of every model the curation asks, in pipeline order; ``judge``
        is the config's judge model, if the judge is one."""

    def references(self, judge: str | None) -> list[str]:
        return [name for _, name in self.roles(judge)]

    def recuration_roles(self) -> tuple[str, ...]:
        """The roles a re-curation can give new models (``--add-model ROLE=SPEC``), the default
        first; empty: this benchmark's releases are not re-curated."""
        return ()

    def add_recuration_model(self, role: str, name: str) -> None:
        """Give model ``name`` the re-curation ``role`` (one of ``recuration_roles``)."""
        raise ConfigError(f"{type(self).__name__} takes no re-curation models")


class DedupConfig(StrictModel):
    """Near-duplicates and leakage, checked on every release (``annotation/dedup.py``)."""

    image_distance: int = Field(default=4, ge=0, le=32)  # max Hamming distance of 64-bit perceptual hashes
    question_threshold: float = Field(default=0.8, gt=0.0, le=1.0)  # min Jaccard of char 5-grams of questions
    num_perm: int = Field(default=128, ge=16, le=1024)  # MinHash permutations (LSH candidates)
    earlier_versions: bool = True  # compare with the benchmark's earlier versions under releases_root
    against: list[Path] = Field(default_factory=list)  # other release folders (a training set, another benchmark)
    drop: bool = False  # drop samples whose question and image both nearly repeat another (else only flag)


class TaskRunnerConfig(StrictModel):
    kind: Literal["threads", "dask", "ray"] = "threads"
    address: str | None = None  # existing cluster; None starts a local one
    workers: int = Field(default=2, ge=1)
    shard_size: int = Field(default=256, ge=1)  # samples per shard of a model stage


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


CACHE_FORMS = (
    "sqlite:///<absolute path> (one machine) or parts+<URL> (a part per worker process under a URL "
    "or an absolute path, e.g. parts+s3://bucket/prefix, for workers that share no disk)"
)


def cache_location(url: str) -> tuple[Literal["sqlite", "parts"], str]:
    """The kind of response cache ``url`` names and where it lies: ``("sqlite", path)`` or
    ``("parts", path or URL)``; ConfigError for any other form (a one-line message naming both),
    and for a parts URL ``storage.check_url`` refuses (an unknown scheme, a credential in it)."""
    if url.startswith("sqlite:///"):
        return "sqlite", "/" + url[len("sqlite:///") :].lstrip("/")
    if url.startswith("parts+"):
        rest = url[len("parts+") :]
        if storage.is_url(rest):
            try:
                storage.check_url(rest, "cache_url")
            except MmcurateError as exc:
                raise ConfigError(str(exc)) from None
        elif not rest.startswith("/"):
            raise ConfigError(f"cache_url {url!r}: a local parts folder must be an absolute path")
        return "parts", rest
    raise ConfigError(f"unsupported cache_url {url!r}: expected {CACHE_FORMS}")


STORED = ("workdir", "releases_root")  # the settings that may name an object-store URL


class CoreSettings(BaseSettings):
    """The shared settings. ``Settings`` (``settings_type()``) adds one optional field per
    registered benchmark section and an ``evaluation`` section holding the registered
    evaluation sections: a benchmark brings its config with it, core names none."""

    model_config = SettingsConfigDict(env_prefix="MMCURATE_", env_nested_delimiter="__", extra="forbid")

    # a path or a URL (s3://, gs://, file://, memory://; core/storage.py): ingests, caches, indexes
    workdir: Path = Path(".mmcurate")
    releases_root: Path = Path("releases")  # a path or a URL, as workdir
    # default: sqlite at workdir/responses.sqlite, or parts+<workdir URL>/responses for a workdir
    # in an object store; forms: ``cache_location``
    cache_url: str | None = None
    models: dict[str, ModelSpec] = Field(default_factory=dict)
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    task_runner: TaskRunnerConfig = Field(default_factory=TaskRunnerConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    # a Prefect notification block (``<type slug>/<name>``, e.g. slack-webhook/curation) told
    # the outcome of unattended runs (``mmcurate watch``, the scheduled watch deployment)
    notify_block: str | None = Field(default=None, pattern=r"^[a-z0-9-]+/[A-Za-z0-9_.-]+$")

    @field_validator("cache_url")
    @classmethod
    def _cache_form(cls, url: str | None) -> str | None:
        if url is not None:
            cache_location(url)
        return url

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

    # workdir / releases_root given as an object-store URL, by field; the field itself then holds
    # this worker's local working copy of it (storage.scratch_for)
    _stores: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _stored_at_urls(cls, data: Any, handler: Any) -> CoreSettings:
        """A remote ``workdir`` / ``releases_root`` URL is kept aside (``mirror``) and the
        field becomes its local scratch copy; a ``file://`` URL is its plain path. A URL that
        does not parse is left for ``_check_url`` to refuse with the field's name."""
        stores = {}
        if isinstance(data, dict):
            data = dict(data)
            for name in STORED:
                value = data.get(name)
                if storage.is_url(value):
                    try:
                        location = storage.Location.parse(value, name)
                    except MmcurateError:
                        continue
                    data[name] = location.local_path if location.is_local else storage.scratch_for(location, name)
                    if not location.is_local:
                        stores[name] = location.url
        settings: CoreSettings = handler(data)
        settings._stores = {**settings._stores, **stores}
        return settings

    @field_validator("workdir", "releases_root", mode="before")
    @classmethod
    def _check_url(cls, value: Any) -> Any:
        if storage.is_url(value):
            storage.check_url(value, "")
        return value

    def mirror(self, name: str) -> storage.Mirror:
        """``workdir`` or ``releases_root`` as the pipeline works on it: the local folder, and the
        object store behind it when the setting is a URL."""
        url = self._stores.get(name)
        return storage.Mirror(getattr(self, name), storage.Location(url) if url else None)

    def image_store(self) -> ImageStore:
        """The run's image store, ``workdir/images``: with a workdir in an object store, this
        machine's copy of the store's ``images/`` (``ImageStore``'s ``remote``)."""
        workdir = self.mirror("workdir")
        return ImageStore(workdir.local / "images", remote=workdir.remote / "images" if workdir.remote else None)

    def on_this_machine(self) -> Self:
        """These settings as another process uses them (a Dask or Ray worker, which unpickles
        the flow's): each setting stored at a URL gets its working copy in this process's
        scratch folder (``storage.scratch_for``), not in the folder of the process that read the
        config, which another machine does not have."""
        moved = {name: storage.scratch_for(storage.Location(url), name) for name, url in self._stores.items()}
        return self.model_copy(update=moved) if moved else self

    @model_validator(mode="before")
    @classmethod
    def _name_models(cls, data: Any) -> Any:
        """Models are keyed by name in YAML; the key is the name unless one is given."""
        if isinstance(data, dict) and isinstance(data.get("models"), dict):
            data["models"] = {
                key: ({"name": key, **spec} if isinstance(spec, dict) else spec) for key, spec in data["models"].items()
            }
        return data

    @model_validator(mode="after")
    def _references(self) -> CoreSettings:
        parts = self.parts().values()
        wanted = [self.judge.model] if self.judge.model else []
        wanted += [name for part in parts for name in part.references(self.judge.model)]
        missing = sorted(set(wanted) - set(self.models))
        if missing:
            raise ValueError(
                f"unknown {'model' if len(missing) == 1 else 'models'} {missing}; defined: {sorted(self.models)}"
            )
        for part in parts:
            part.check_models(self.models)
        return self

    def parts(self) -> dict[str, Section]:
        """Every registered section this config has, by config path (``<section>``,
        ``evaluation.<section>``)."""
        found = {name: value for name in type(self).model_fields if isinstance(value := getattr(self, name), Section)}
        evaluation = getattr(self, "evaluation", None)
        for name in type(evaluation).model_fields if evaluation is not None else ():
            found[f"evaluation.{name}"] = getattr(evaluation, name)
        return found

    def roles(self, benchmark: str) -> list[tuple[str, str]]:
        """(role, model name) of every model the curation of ``benchmark`` asks, in pipeline order."""
        return self.section(benchmark).roles(self.judge.model)

    def sections(self) -> dict[str, BenchmarkSection]:
        """The benchmark sections this config has, by name."""
        return {
            name: value
            for name in type(self).model_fields
            if isinstance(value := getattr(self, name), BenchmarkSection)
        }

    def add_model(self, spec: str) -> ModelSpec:
        """Resolve ``spec``: a model defined here by name, or a YAML file holding one model
        spec (which is added under its name). Used by ``--model`` / ``--add-model`` (which
        also takes a catalog's model: ``releases.recuration.resolve_added``)."""
        if spec in self.models:
            return self.models[spec]
        path = Path(spec)
        if not path.is_file():
            raise ConfigError(
                f"model {spec!r} is neither defined in the config ({listed(sorted(self.models))}) nor a YAML file"
            )
        data = read_yaml(path, "model file")
        if not isinstance(data, dict):
            raise ConfigError(
                f"model file {path}: expected a mapping of model fields (name, backend, ...), got "
                + ("an empty file" if data is None else f"a {type(data).__name__}")
            )
        try:
            model = model_from_file_data(data, path.parent)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = field_path(first["loc"])
            raise ConfigError(f"model file {path}: {where + ': ' if where else ''}{first['msg']}") from None
        except TypeError as exc:  # a key that is not a string
            raise ConfigError(f"model file {path}: {exc}") from None
        except RecursionError:
            raise ConfigError(f"model file {path}: nested too deeply to read") from None
        return self.register_model(model, f"model file {path}")

    def register_model(self, model: ModelSpec, origin: str) -> ModelSpec:
        """Add ``model`` (read from ``origin``: a model file, a catalog entry) under its name;
        refused when the config already defines that name otherwise."""
        if model.name in self.models and self.models[model.name] != model:
            raise ConfigError(f"{origin} redefines model {model.name!r}")
        self.models[model.name] = model
        return model

    def section(self, benchmark: str) -> BenchmarkSection:
        """The config section of ``benchmark`` (its registered name), or ConfigError. (A benchmark's
        own code reads its section as its own type: ``<its config class>.of(settings)``.)"""
        section = getattr(self, benchmark, None)
        if not isinstance(section, BenchmarkSection):
            raise ConfigError(f"the config has no '{benchmark}' section")
        return section

    def sources_of(self, benchmark: str) -> list[tuple[str, SourceSpec]]:
        """(config path, spec) of every source of ``benchmark``, e.g. ``("<benchmark>.sources[2]", spec)``."""
        return self.section(benchmark).sources_at(benchmark)

    def check_sources(self, benchmark: str) -> None:
        """Refuse, before a curation run starts, a source whose root or image folder is not a
        directory (a re-curation or an evaluation reads no source, so loading does not check)."""
        for where, source in self.sources_of(benchmark):
            for what, folder in (("root", source.root), ("images", source.images)):
                if folder is not None and not folder.is_dir():
                    raise ConfigError(f"{where} ({source.name}): {what} {folder} is not a readable directory")

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"unknown model {name!r}; defined: {sorted(self.models)}") from None

    @property
    def response_cache_url(self) -> str:
        """``cache_url``, else beside the workdir: SQLite on a local one, parts in an object store
        (SQLite's WAL needs one machine's disk)."""
        if self.cache_url:
            return self.cache_url
        if "workdir" in self._stores:
            return f"parts+{self._stores['workdir'].rstrip('/')}/responses"
        return f"sqlite:///{(self.workdir / 'responses.sqlite').resolve()}"

    @property
    def index_dir(self) -> Path:
        """Where vector indexes and knowledge-base vector stores are kept between runs."""
        return self.workdir / "indexes"

    def resolved(self) -> dict[str, Any]:
        """The fully resolved configuration as plain JSON-able data (for manifests); a workdir or
        releases root in an object store as its URL."""
        return {**self.model_dump(mode="json"), **self._stores}

    @staticmethod
    def from_resolved(data: dict[str, Any], base: Path) -> CoreSettings:
        """Settings from ``resolved()`` data as a manifest records it (paths relative to the
        release folder ``base``), with environment overrides as ``load_config`` applies them."""
        cls = settings_type()
        try:
            settings = cls(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ConfigError(f"recorded config: {field_path(first['loc'])}: {first['msg']}") from None
        from_env = _leaves(_ModelEnv(cls, _model_keys(data))())
        return _read_files(_resolve_model_paths(settings, base.resolve(), from_env))


_SECTIONS: dict[str, type[Section]] = {}  # top-level benchmark sections, by name
_EVALUATION_SECTIONS: dict[str, type[Section]] = {}  # sections under ``evaluation``, by name


def register_sections(
    sections: Mapping[str, type[Section]], evaluation: Mapping[str, type[Section]] | None = None
) -> None:
    """Add a benchmark's parts of the config (``benchmarks.register`` calls this): top-level
    ``sections`` (each optional in a file) and sections under ``evaluation`` (defaults when a
    file leaves them out). A name names one section class."""
    taken = set(CoreSettings.model_fields) | {"evaluation"}
    for registry, parts, prefix in ((_SECTIONS, sections, ""), (_EVALUATION_SECTIONS, evaluation or {}, "evaluation.")):
        for name, model in parts.items():
            if (prefix == "" and name in taken) or registry.get(name, model) is not model:
                raise ConfigError(f"config section {prefix}{name} is taken; choose another name")
            registry[name] = model


def section_name(kind: type[Section]) -> str:
    """The config path ``kind`` is registered under (``<name>`` or ``evaluation.<name>``)."""
    for registry, prefix in ((_SECTIONS, ""), (_EVALUATION_SECTIONS, "evaluation.")):
        for name, registered in registry.items():
            if registered is kind:
                return prefix + name
    raise ConfigError(f"{kind.__name__} is not a registered config section")


def settings_type() -> type[CoreSettings]:
    """The settings of every registered section (``Settings``), built once per set of sections."""
    return _settings_type(tuple(_SECTIONS.items()), tuple(_EVALUATION_SECTIONS.items()))


@cache
def _settings_type(
    sections: tuple[tuple[str, type[Section]], ...], evaluation: tuple[tuple[str, type[Section]], ...]
) -> type[CoreSettings]:
    parts: dict[str, Any] = {name: (model, Field(default_factory=model)) for name, model in evaluation}
    evaluation_cls = create_model("EvaluationConfig", __base__=StrictModel, __module__=__name__, **parts)
    parts = {name: (model | None, None) for name, model in sections}
    return create_model(
        "Settings",
        __base__=CoreSettings,
        __module__=__name__,
        evaluation=(evaluation_cls, Field(default_factory=evaluation_cls)),
        **parts,
    )


if TYPE_CHECKING:
    Settings = CoreSettings
else:

    def __getattr__(name: str) -> Any:
        """``Settings``: the settings type of the sections registered so far (``settings_type``),
        and its ``EvaluationConfig`` (so that pickle finds both by name)."""
        if name == "Settings":
            return settings_type()
        if name == "EvaluationConfig":
            return settings_type().model_fields["evaluation"].annotation
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as the config spells it: ``<section>.sources[0].limit``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def model_from_file_data(data: Any, folder: Path) -> ModelSpec:
    """A model spec as a file holds it (a YAML model file, a catalog entry): relative paths
    (a scripted model's ``script``, a ``tokenizer``) resolve against the file's ``folder``."""
    return _resolve_model_paths(ModelSpec(**data), folder.resolve())


def _model_keys(*sources: dict[str, Any]) -> set[str]:
    return {key for data in sources if isinstance(data.get("models"), dict) for key in data["models"]}


Location = tuple[Any, ...]
M = TypeVar("M", bound=BaseModel)


def _leaves(data: Any, at: Location = ()) -> set[Location]:
    """The locations of the values a nested dict sets (a list is one value)."""
    if isinstance(data, dict):
        return {leaf for key, value in data.items() for leaf in _leaves(value, (*at, key))}
    return {at}


def _resolve_model_paths(model: M, base: Path, from_env: Collection[Location] = frozenset()) -> M:
    """``model`` with its relative paths made absolute in place (``_resolve_paths``)."""
    resolved: M = _resolve_paths(model, base, from_env)
    return resolved


def _resolve_paths(obj: Any, base: Path, from_env: Collection[Location] = frozenset(), at: Location = ()) -> Any:
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


def bundled_config(name: str) -> Path:
    """A configuration shipped with mmcurate (``demo.yaml``, ``dryrun.yaml``, ...): the file in
    ``configs/`` of a checkout, or the package data ``mmcurate.configs`` of an install. Its
    relative paths resolve against its own folder, as for any config (the demo's point at
    the fixtures of a checkout, ``tests/fixtures/generated``)."""
    folder = Path(str(files("mmcurate.configs")))
    path = folder / name
    if not path.is_file():
        shipped = sorted(p.name for p in folder.glob("*.yaml"))
        raise ConfigError(f"no bundled config {name!r}; bundled: {', '.join(shipped)}")
    return path


def _read_files(settings: CoreSettings) -> CoreSettings:
    """Read the files the sections name (after their paths are resolved)."""
    for where, part in settings.parts().items():
        part.read_files(where)
    return settings


MAX_YAML_BYTES = 16 * 2**20  # a config, catalog, model or prompt file; real ones are a few kB
MAX_YAML_VALUES = 100_000  # values of one document once its aliases are expanded


class _BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML is untyped here (no types-PyYAML)
    """YAML's safe loader, refusing a document whose aliases expand past ``MAX_YAML_VALUES``
    values. An alias is one shared node to PyYAML, cheap to load; but every reader after it
    (pydantic, a manifest's JSON) copies it out: nine levels of ten aliases are 10^9 values."""

    def construct_document(self, node: yaml.Node) -> Any:
        _expanded_size(node, {}, set())
        return super().construct_document(node)


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """The values under ``node`` with every alias expanded (``sizes``: of the nodes counted so
    far, so a shared node is walked once); ConfigError past ``MAX_YAML_VALUES`` or for a node
    that contains itself (it never ends when expanded)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise ConfigError("a YAML alias refers to a node that contains it: it never ends when expanded")
    open_nodes.add(key)
    children = (
        [part for pair in node.value for part in pair]
        if isinstance(node, yaml.MappingNode)
        else node.value
        if isinstance(node, yaml.SequenceNode)
        else []
    )
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_nodes)
        if total > MAX_YAML_VALUES:
            raise ConfigError(f"its YAML aliases expand to more than {MAX_YAML_VALUES:,} values (an alias bomb?)")
    open_nodes.discard(key)
    sizes[key] = total
    return total


def safe_yaml(text: str | bytes) -> Any:
    """``yaml.safe_load`` within bounds: ConfigError (one line, without a file name) for a
    document over ``MAX_YAML_BYTES`` or whose aliases expand past ``MAX_YAML_VALUES`` values."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"larger than {MAX_YAML_BYTES // 2**20} MB: not a configuration file")
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506  (a SafeLoader)


def read_yaml(path: Path, what: str) -> Any:
    """The YAML document in ``path``; ConfigError (one line, naming ``what``) when it is not
    valid YAML, nested too deeply to read, or too large (``safe_yaml``)."""
    try:
        if path.stat().st_size > MAX_YAML_BYTES:  # refused before it is read
            raise ConfigError(f"larger than {MAX_YAML_BYTES // 2**20} MB: not a configuration file")
        return safe_yaml(path.read_text())
    except ConfigError as exc:
        raise ConfigError(f"{what} {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}".replace("\n", " ")) from None
    except RecursionError:
        raise ConfigError(f"{what} {path} is nested too deeply to read") from None


def load_config(path: Path | str, **overrides: Any) -> CoreSettings:
    """Load ``path`` (YAML) with environment overrides; raise ConfigError with one clear line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    data = read_yaml(path, "config")

    settings_cls = settings_type()

    class _FromFile(settings_cls):  # type: ignore[valid-type,misc]
        model_config = SettingsConfigDict(yaml_file=path)

    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"config {path}: expected a mapping of settings at the top level, got a {type(data).__name__}"
        )
    try:
        settings = _FromFile(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(
            f"config {path}: {field_path(first['loc'])}: {first['msg']} ({counted(exc.error_count(), 'error')})"
        ) from None
    resolved = settings_cls.model_construct(**{k: getattr(settings, k) for k in settings_cls.model_fields})
    resolved._stores = settings._stores
    known = _model_keys(overrides, data if isinstance(data, dict) else {})
    from_env = _leaves(_ModelEnv(_FromFile, known)()) - _leaves(overrides)
    try:
        return _read_files(_resolve_model_paths(resolved, path.parent.resolve(), from_env))
    except ConfigError as exc:
        raise ConfigError(f"config {path}: {exc}") from None
