"""Raw-source adapters, each mapping one published format onto the canonical schema."""
from __future__ import annotations

from importlib import import_module

from mmcurate.core.errors import MmcurateError

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
    "pope": "pope:PopeSource",
    "pope_objects": "pope_objects:PopeObjectsSource",
}


def adapter_class(name: str):  # -> type[SourceAdapter]
    try:
        module, cls = ADAPTERS[name].split(":")
    except KeyError:
        raise MmcurateError(f"unknown source {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    return getattr(import_module(f"{__name__}.{module}"), cls)
