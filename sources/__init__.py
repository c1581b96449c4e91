"""Raw-source adapters, each mapping one published format onto the canonical schema."""
from __future__ import annotations

from importlib import import_module

from typing import Any

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


def adapter_class(name: str):  # -> type[SourceAdapter]
    try:
        module, cls = ADAPTERS[name].split(":")
    except KeyError:
        raise MmcurateError(f"unknown source {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    return getattr(import_module(f"{__name__}.{module}"), cls)


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
