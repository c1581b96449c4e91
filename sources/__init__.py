"""Raw-source adapters, each mapping one published format onto the canonical schema."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import yaml
from pydantic import ValidationError

from mmcurate.core.errors import ConfigError, MmcurateError

# name -> "module:Class"; imported lazily so one adapter's extras never burden another
ADAPTERS: dict[str, str] = {
    "reddit": "reddit:RedditSource",
    "infoseek": "infoseek:InfoSeekSource",
    "evqa": "evqa:EncyclopedicVQASource",
    "webqa": "webqa:WebQASource",
    "mmdocrag": "mmdocrag:MMDocRAGSource",
    "mragbench": "mragbench:MRAGBenchSource",
    "viquae": "viquae:ViQuAESource",
    "gqa": "gqa:GQASource",
    "textvqa": "textvqa:TextVQASource",
    "docvqa": "docvqa:DocVQASource",
    "chartqa": "chartqa:ChartQASource",
    "fire": "fire:FIRESource",
    "cragmm": "cragmm:CragMMSource",
    "pope": "pope:PopeSource",
    "pope_objects": "pope_objects:PopeObjectsSource",
    "mme": "mme:MMESource",
}


def adapter_paths() -> dict[str, str]:
    """Every source adapter: name -> ``"package.module:Class"``, the built-in ones (``ADAPTERS``,
    imported when used) and those the registered benchmarks bring from packages of their own
    (``benchmarks.register_adapter``)."""
    brought = {name: f"{cls.__module__}:{cls.__qualname__}" for name, (_, cls) in _brought().items()}
    return {**{name: f"{__name__}.{path}" for name, path in ADAPTERS.items()}, **brought}


def _brought() -> dict[str, tuple[str, type]]:
    """The adapters benchmarks bring: source name -> (benchmark, class), none taking a built-in name."""
    from mmcurate.benchmarks.parts import registered_adapters

    brought = registered_adapters()
    for name, (benchmark, _) in brought.items():
        if name in ADAPTERS:
            raise ConfigError(
                f"benchmark {benchmark!r} brings a source adapter {name!r}, a name "
                "mmcurate's own adapters use: give it another name"
            )
    return brought


def adapter_class(name: str):  # -> type[SourceAdapter]
    brought = _brought()
    if name in brought:
        return brought[name][1]
    if name not in ADAPTERS:
        raise MmcurateError(f"unknown source {name!r}; known: {', '.join(sorted({*ADAPTERS, *brought}))}")
    module, _, cls = ADAPTERS[name].partition(":")
    return getattr(import_module(f"{__name__}.{module}"), cls)


def command_line_options(name: str, pairs: list[str]) -> dict[str, Any]:
    """The adapter options given as ``KEY=VALUE`` (``mmcurate ingest --option``), each value read
    as YAML (``set=multi_turn``, ``sample_num=2``, ``subtasks=[existence, count]``) and checked
    against the adapter's option names: a one-line error naming them otherwise (a value the option
    does not take is refused by the adapter, ``<source> option <key>: ...``)."""
    options = adapter_class(name).Options
    known = ", ".join(options.model_fields) or "none"
    given: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option {pair!r}: write KEY=VALUE (the {name} options: {known})")
        if key.strip() not in options.model_fields:
            raise ConfigError(f"--option {key.strip()}: not an option of {name} (its options: {known})")
        try:
            given[key.strip()] = yaml.safe_load(value) if value.strip() else None
        except yaml.YAMLError:
            raise ConfigError(f"--option {key.strip()}: {value!r} is not a value") from None
    return given


def check_source(name: str, options: dict[str, Any], where: str) -> None:
    """Refuse, with the config path ``where`` (e.g. ``deflectionbench.sources[0]``), a source
    the pipeline has no adapter for or whose options its adapter does not accept: before a
    run starts, as the rest of the config is checked at load."""
    try:
        cls = adapter_class(name)
    except MmcurateError as exc:
        raise ConfigError(f"{where}.name: {exc}") from None
    try:
        cls.Options(**options)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ConfigError(f"{where}.options{at}: {first['msg']}") from None
