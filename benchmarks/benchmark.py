"""One object per benchmark: everything that differs between benchmarks, in one place.

A ``Benchmark`` names its config section and release folder (``name``), the settings it
brings (its section's model, and any other section it owns), the source adapters it reads,
what its releases are, its flows, its evaluation, its plan and its human review of judges.
Commands and flows ask the registry (``mmcurate.benchmarks.get``) instead of comparing
benchmark names, so adding a benchmark is one module here and one line in ``registry.py``
(or a ``register`` call from a package of its own): no core file changes.

Its settings models are classes (they import only ``core``, so the registry stays light and
``core.config`` builds the ``Settings`` type from them); its other parts are named by import
path, ``"package.module:attribute"``, loaded when they are used (as ``sources.ADAPTERS`` names adapters): the registry imports nothing heavy,
so ``mmcurate --help`` answers at once and any layer may consult it, and the parts (release
kinds, planners, flows, which sit in layers above and below) keep their own places.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmcurate.core.config import BenchmarkSection, CoreSettings, Section
from mmcurate.core.errors import MmcurateError


def load(path: str) -> Any:
    """The object at ``"package.module:attribute"``."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def load_function(path: str) -> Callable[..., Any]:
    """The function at ``"package.module:attribute"``."""
    function: Callable[..., Any] = load(path)
    return function


@dataclass(frozen=True)
class Evaluation:
    """How a benchmark's releases are evaluated.

    ``steps`` (a function's path) is the benchmark's part of the one evaluation flow
    (``flows/evaluate.py``), after the flow has opened the release, loaded the settings, added
    the model and chosen the output folder: it is called as ``steps(release, settings, model,
    folder, allow_incomplete, **options)`` with the ``options`` it lists (parameter names) and
    answers, grades and writes the run's tables there; ``check`` (a function's path) validates
    and completes the options a user gave before any flow starts, returning the flow's
    keyword arguments; without one the options pass as given. ``plan`` (a function's path,
    ``(settings, release, model, checked options) -> Plan``) gives the calls of a run before
    it starts (``mmcurate plan CONFIG --evaluate RELEASE --model M``). ``refuse`` (a function's
    path, ``(settings, model, checked options) -> None``) raises on a model or configuration the
    evaluation cannot run with, so the command line refuses before any flow starts."""

    steps: str
    options: tuple[str, ...] = ()
    check: str | None = None
    plan: str | None = None
    refuse: str | None = None

    def arguments(self, benchmark: str, given: Mapping[str, Any], flags: Mapping[str, str]) -> dict[str, Any]:
        """``given`` (option name -> value, only what the user set) checked against what this
        evaluation takes; ``flags`` spells an option as the user typed it (``--scenario``)."""
        foreign = [flags.get(name, name) for name in given if name not in self.options]
        if foreign:
            takes = ", ".join(flags.get(name, name) for name in self.options) or "none"
            raise MmcurateError(f"{', '.join(foreign)}: not an option of the {benchmark} evaluation "
                                f"(its options: {takes})")
        return load(self.check)(dict(given)) if self.check else dict(given)

    def refuse_unrunnable(self, settings: CoreSettings, model: str, arguments: Mapping[str, Any]) -> None:
        if self.refuse:
            load(self.refuse)(settings, model, arguments)

    def steps_function(self) -> Callable[..., None]:
        return load_function(self.steps)

    def planner(self, benchmark: str) -> Callable[..., Any]:
        """The evaluation's plan (a ``planning.plan.Plan``) as a function (see the class docstring)."""
        if self.plan is None:
            raise MmcurateError(f"mmcurate has no plan of a {benchmark} evaluation yet")
        return load_function(self.plan)


@dataclass(frozen=True)
class Benchmark:
    name: str  # the config section, the release folder, the word on the command line
    title: str  # what ``mmcurate run <name> --help`` says it curates
    paper: str  # the seed paper it follows (shared/seeds/<file>)
    sources: tuple[str, ...]  # the source adapters its curation reads
    config: type[BenchmarkSection]  # its section of the config, under ``name``
    # adapters it brings from a package of its own: source name -> "package.module:Class" (a
    # ``sources.base.SourceAdapter``); the built-in ones are ``sources.ADAPTERS``
    adapters: Mapping[str, str] = field(default_factory=dict)
    sections: Mapping[str, type[Section]] = field(default_factory=dict)  # other top-level sections it owns
    evaluation_config: type[Section] | None = None  # its section under ``evaluation``
    evaluation_sections: Mapping[str, type[Section]] = field(default_factory=dict)  # others under ``evaluation``
    release: str | None = None  # its ``releases.kind.ReleaseKind``; None: evaluated here, not curated
    curate: str | None = None  # the curation flow
    recurate: str | None = None  # its re-curation steps (``tasks.recuration.Recurated``), run by ``flows/recurate.py``
    evaluation: Evaluation | None = None
    # its planner, ``(settings, samples: int | None, retention: str | None) -> planning.plan.Plan``:
    # requests, tokens and cost of a curation run, before it starts
    plan: str | None = None
    # ``(releases.recuration.Recuration) -> Plan``: the calls a re-curation's added models make
    recuration_plan: str | None = None
    judge_review: str | None = None  # its ``review.judges.JudgeReview`` (annotate --evaluation)

    def section_of(self, settings: CoreSettings) -> BenchmarkSection:
        """This benchmark's section of ``settings`` (an instance of ``config``), or ConfigError."""
        return settings.section(self.name)

    # The parts load by path and are typed where they are defined: the registry imports only core.
    def release_kind(self) -> Any:
        """Its ``releases.kind.ReleaseKind``."""
        return load(self._required("release", "releases"))

    def planner(self) -> Callable[..., Any] | None:
        return load(self.plan) if self.plan else None

    def recuration_planner(self) -> Callable[..., Any]:
        return load_function(self._required("recuration_plan", "plan of a re-curation"))

    def judges(self) -> Any:
        """Its ``review.judges.JudgeReview``."""
        return load(self._required("judge_review", "review of its evaluation's judge"))

    def flow(self, which: str) -> Any:
        """The Prefect flow ``which`` (``curate``) of this benchmark."""
        return load(self._required(which, f"{which} flow"))

    def recuration_steps(self) -> Callable[..., Any]:
        """What re-curating a release (a ``releases.recuration.Recuration``) of this benchmark
        checks again (``flows/recurate.py``)."""
        return load_function(self._required("recurate", "re-curation"))

    def required_evaluation(self) -> Evaluation:
        """How this benchmark's releases are evaluated; one line when mmcurate has no evaluation of them."""
        if self.evaluation is None:
            raise MmcurateError(f"mmcurate has no evaluation of {self.name} releases")
        return self.evaluation

    def _required(self, part: str, what: str) -> str:
        path: str | None = getattr(self, part)
        if path is None:
            raise MmcurateError(f"{self.name} has no {what} in mmcurate")
        return path
