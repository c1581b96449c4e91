"""One object per benchmark: everything that differs between benchmarks, in one place.

A ``Benchmark`` names its config section and release folder (``name``), the settings it
brings (its section's model, and any other section it owns), the source adapters it reads,
whether mmcurate curates it and the options of its evaluation. Commands and flows ask the
registry (``mmcurate.benchmarks.get``) instead of comparing benchmark names, so adding a
benchmark is one module here and one line in ``registry.py`` (or a ``register`` call from a
package of its own): no core file changes.

Its settings models are classes (they import only ``core``, so the registry stays light and
``core.config`` builds the ``Settings`` type from them). Its other parts (release kind, flows,
evaluation steps, planners, judge review) sit in the layers that own them, which register them
(``parts.register_part``); the methods below answer them once the asking layer has imported
the owning layer's ``builtin`` module (see ``parts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mmcurate.core.config import BenchmarkSection, CoreSettings, Section
from mmcurate.core.errors import MmcurateError

from .parts import registered_part


@dataclass(frozen=True)
class Evaluation:
    """How a benchmark's releases are evaluated: the options it takes (parameter names). Its steps
    (``evaluate``: its part of the one evaluation flow, ``flows/evaluate.py``, called after the
    flow has opened the release, loaded the settings, added the model and chosen the output
    folder as ``steps(release, settings, model, folder, allow_incomplete, **options)``; it
    answers, grades and writes the run's tables there), the check that validates and completes
    the options a user gave before any flow starts (``evaluation_check``; without one they pass
    as given), its plan (``evaluation_plan``, ``mmcurate plan CONFIG --evaluate RELEASE --model
    M``) and its refusal of a model or configuration it cannot run with (``evaluation_refuse``, so
    the command line refuses before any flow starts) are parts the owning layers register."""

    options: tuple[str, ...] = ()

    def arguments(self, benchmark: str, given: Mapping[str, Any], flags: Mapping[str, str]) -> dict[str, Any]:
        """``given`` (option name -> value, only what the user set) checked against what this
        evaluation takes; ``flags`` spells an option as the user typed it (``--scenario``)."""
        foreign = [flags.get(name, name) for name in given if name not in self.options]
        if foreign:
            takes = ", ".join(flags.get(name, name) for name in self.options) or "none"
            raise MmcurateError(
                f"{', '.join(foreign)}: not an option of the {benchmark} evaluation (its options: {takes})"
            )
        check = registered_part(benchmark, "evaluation_check")
        return check(dict(given)) if check else dict(given)

    def refuse_unrunnable(
        self, benchmark: str, settings: CoreSettings, model: str, arguments: Mapping[str, Any]
    ) -> None:
        refuse = registered_part(benchmark, "evaluation_refuse")
        if refuse:
            refuse(settings, model, arguments)

    def steps_function(self, benchmark: str) -> Callable[..., None]:
        steps: Callable[..., None] | None = registered_part(benchmark, "evaluate")
        if steps is None:
            raise MmcurateError(f"mmcurate has no evaluation of {benchmark} releases")
        return steps

    def planner(self, benchmark: str) -> Callable[..., Any]:
        """The evaluation's plan (a ``planning.plan.Plan``) as a function (see the class docstring)."""
        plan: Callable[..., Any] | None = registered_part(benchmark, "evaluation_plan")
        if plan is None:
            raise MmcurateError(f"mmcurate has no plan of a {benchmark} evaluation yet")
        return plan


@dataclass(frozen=True)
class Benchmark:
    name: str  # the config section, the release folder, the word on the command line
    title: str  # what ``mmcurate run <name> --help`` says it curates
    paper: str  # the seed paper it follows (shared/seeds/<file>)
    sources: tuple[str, ...]  # the source adapters its curation reads
    config: type[BenchmarkSection]  # its section of the config, under ``name``
    sections: Mapping[str, type[Section]] = field(default_factory=dict)  # other top-level sections it owns
    evaluation_config: type[Section] | None = None  # its section under ``evaluation``
    evaluation_sections: Mapping[str, type[Section]] = field(default_factory=dict)  # others under ``evaluation``
    # mmcurate curates it (``mmcurate run <name>``, its ``curate`` flow); False: evaluated here, or
    # released by a package's own code, not curated by a command
    curated: bool = False
    evaluation: Evaluation | None = None

    def section_of(self, settings: CoreSettings) -> BenchmarkSection:
        """This benchmark's section of ``settings`` (an instance of ``config``), or ConfigError."""
        return settings.section(self.name)

    # The parts are registered by the layers that own them and typed where they are defined: the
    # registry imports only core.
    def release_kind(self) -> Any:
        """Its ``releases.kind.ReleaseKind``."""
        return self._required("release", "releases")

    def planner(self) -> Callable[..., Any] | None:
        return registered_part(self.name, "plan")

    def recuration_planner(self) -> Callable[..., Any]:
        planner: Callable[..., Any] = self._required("recuration_plan", "plan of a re-curation")
        return planner

    def judges(self) -> Any:
        """Its ``review.judges.JudgeReview``."""
        return self._required("judge_review", "review of its evaluation's judge")

    def flow(self, which: str) -> Any:
        """The Prefect flow ``which`` (``curate``) of this benchmark."""
        return self._required(which, f"{which} flow")

    def recuration_steps(self) -> Callable[..., Any]:
        """What re-curating a release (a ``releases.recuration.Recuration``) of this benchmark
        checks again (``flows/recurate.py``)."""
        steps: Callable[..., Any] = self._required("recurate", "re-curation")
        return steps

    def required_evaluation(self) -> Evaluation:
        """How this benchmark's releases are evaluated; one line when mmcurate has no evaluation of them."""
        if self.evaluation is None:
            raise MmcurateError(f"mmcurate has no evaluation of {self.name} releases")
        return self.evaluation

    def _required(self, part: str, what: str) -> Any:
        found = registered_part(self.name, part)
        if found is None:
            raise MmcurateError(f"{self.name} has no {what} in mmcurate")
        return found
