"""A benchmark's parts, registered by the layer that owns each (lm-evaluation-harness's
``@register_*`` decorators): its release kind by ``releases/<name>/``, its flows and evaluation
steps by ``flows/<name>/``, its evaluation's option check and refusal by ``evaluation/<name>/``,
its planners by ``planning/``, its judge review by ``review/<name>/``, a source adapter of its own
by its package. Each registration is an import of this module from the owning layer, and each
layer's ``builtin`` module imports mmcurate's own registering modules, so a consumer that asks
for a part (``Benchmark.release_kind()``, ...) first imports that layer's ``builtin``: every link is
an import import-linter checks. A package of its own registers its parts the same way::

    register_part("toy", "release")(KIND)
    register_adapter("toy", "toy")(ToySource)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mmcurate.core.errors import ConfigError

T = TypeVar("T")

# every part a benchmark may have, and what it is (the object registered)
PARTS: dict[str, str] = {
    "release": "its releases.kind.ReleaseKind",
    "curate": "its curation flow (a Prefect flow)",
    "recurate": "its re-curation steps, (releases.recuration.Recuration) -> tasks.recuration.Recurated, "
    "run by flows/recurate.py",
    "plan": "its curation planner, (settings, samples: int | None, retention: str | None) -> planning.plan.Plan",
    "recuration_plan": "the calls a re-curation's added models make, (releases.recuration.Recuration) -> Plan",
    "judge_review": "its review.judges.JudgeReview (annotate --evaluation)",
    "evaluate": "its part of the evaluation flow (flows/evaluate.py), "
    "(release, settings, model, folder, allow_incomplete, **options) -> None",
    "evaluation_check": "checks and completes the evaluation options a user gave, (options) -> options",
    "evaluation_refuse": "raises on a model or configuration its evaluation cannot run with, "
    "(settings, model, checked options) -> None",
    "evaluation_plan": "the calls of an evaluation before it starts, (settings, release, model, checked options) -> Plan",
}

_PARTS: dict[tuple[str, str], Any] = {}  # (benchmark, part) -> the object
_ADAPTERS: dict[str, tuple[str, type]] = {}  # source name -> (benchmark, its sources.base.SourceAdapter)


def register_part(benchmark: str, part: str) -> Callable[[T], T]:
    """A decorator that makes its object ``benchmark``'s ``part`` (one of ``PARTS``) and returns it."""
    if part not in PARTS:
        raise ConfigError(f"unknown part {part!r} of a benchmark; known: {', '.join(PARTS)}")

    def add(obj: T) -> T:
        if isinstance(obj, str):
            raise ConfigError(f"{benchmark} {part}: register the object itself, not its import path {obj!r}")
        held = _PARTS.setdefault((benchmark, part), obj)
        if held is not obj and (_origin(held) is None or _origin(held) != _origin(obj)):
            raise ConfigError(f"benchmark {benchmark!r} already has its {part} registered")
        return obj

    return add


def _origin(obj: Any) -> tuple[str, int, str] | None:
    """Where a function (or a Prefect flow's) is defined: the same definition executed again, as
    Prefect does when it loads a flow file as a script (``prefect deploy``), registers nothing new."""
    code = getattr(getattr(obj, "fn", obj), "__code__", None)
    return (code.co_filename, code.co_firstlineno, code.co_qualname) if code is not None else None


def registered_part(benchmark: str, part: str) -> Any | None:
    """``benchmark``'s ``part``, or None when none is registered."""
    return _PARTS.get((benchmark, part))


def registered_parts() -> dict[tuple[str, str], Any]:
    """Every registered part, by (benchmark, part)."""
    return dict(_PARTS)


def register_adapter(benchmark: str, source: str) -> Callable[[type[T]], type[T]]:
    """A decorator that adds a source adapter (a ``sources.base.SourceAdapter``) a benchmark brings
    from a package of its own, under the name ``source``; mmcurate's own are ``sources.ADAPTERS``."""

    def add(cls: type[T]) -> type[T]:
        first, held = _ADAPTERS.get(source, (benchmark, cls))
        if held is not cls or first != benchmark:
            raise ConfigError(
                f"benchmark {benchmark!r} brings the source adapter {source!r}, which benchmark {first!r} brought first"
            )
        _ADAPTERS[source] = (benchmark, cls)
        return cls

    return add


def registered_adapters() -> dict[str, tuple[str, type]]:
    """Source name -> (the benchmark that brought it, its adapter class)."""
    return dict(_ADAPTERS)
