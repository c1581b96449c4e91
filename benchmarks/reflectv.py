"""ReflectV (MIRROR, seed 002): reflective, visually grounded multi-turn trajectories, a training set.

Its code, layer by layer (``tests/benchmarks/test_module_lists.py`` keeps this list equal to the tree):

- sources: ``gqa``, ``textvqa``, ``docvqa``, ``chartqa``, ``fire`` (``sources/<name>.py``; the image-QA
  layouts share ``sources/image_qa.py``)
- ``annotation/reflectv/``: the stages in order, ``dialogue.py``, ``trajectory.py``,
  ``reflection.py``, ``grounding.py`` (with the grounders and marks it shares with Kestrel,
  ``annotation/grounders`` and ``annotation/marks``), ``visual.py``, ``formatting.py``; what they
  share, ``chains.py``, ``wording.py``, ``turns.py`` (the turn format and its validator);
  ``recheck.py`` (a re-curation's teachers and verifiers)
- ``evaluation/reflectv/``: ``harness.py`` (no harness task: a training set)
- ``releases/reflectv/``: ``draft.py`` (a run as a release), ``schema.py`` (the dialogues config),
  ``sft.py`` (the training export), ``frames.py`` and ``checks.py`` (its Great Expectations suite)
- ``review/reflectv/``: ``trajectories.py`` (Table 6's blind ratings), ``label_studio.py`` (the same as
  a Label Studio project)
- ``planning/reflectv/``: ``curation.py`` (a run's calls per stage)
- ``flows/reflectv/``: ``curate.py`` (Figure 3), ``recurate.py``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field, model_validator

from mmcurate.core.config import BenchmarkSection, ModelSpec, Sources
from mmcurate.core.specs import (
    CaptionSpec,
    GroundingSpec,
    Heuristic,
    LabellerSpec,
    SegmenterSpec,
    Template,
    model_names,
)
from mmcurate.core.visual_prompts import COLORS, MARK_TYPES, Color, MarkType

from .benchmark import Benchmark


class ReflectVConfig(BenchmarkSection):
    """MIRROR's ReflectV curation (seed paper 002, section 4): see flows/reflectv/curate.py."""

    sources: Sources  # image QA in published layouts, and ready-made FIRE dialogues
    student: str | None = None  # answers the question (sees the image); None: only ingested dialogues
    teacher: str | None = None  # sees the ground truth, replies "Score: N" and "Feedback: ..."
    max_turns: int = Field(default=3, ge=1)  # student answers per dialogue at most
    keywords: LabellerSpec = Heuristic()  # grounding keywords: a model, or the rule-based stand-in
    rewriter: str  # rewrites teacher feedback as first-person reflection
    grounding: GroundingSpec
    segmenter: SegmenterSpec | None = None  # SAM 2 masks from the grounded points
    captions: CaptionSpec = Template()  # inserts caption and marks into a reflection: a model, or 'template'
    # a teacher's feedback that states the answer: the paper forbids revealing it only in the inserted
    # caption (Figure 11), so such a chain is kept (False); True collapses it to a QA pair
    collapse_revealing_feedback: bool = False
    verifier: str  # vision model: do the marks show what the reflection names?
    colors: list[Color] = Field(default_factory=lambda: list(COLORS), min_length=1)
    mark_types: list[MarkType] = Field(default_factory=lambda: list(MARK_TYPES), min_length=1)
    rho: float = Field(default=0.75, ge=0.0, le=1.0)  # share of multi-turn chains in the release
    # how rho is reached (annotation/reflectv/formatting.py): by collapsing surplus chains only (002
    # section 4.5, the paper's), or also by dropping surplus QA pairs when chains are too few
    rho_rule: Literal["collapse", "collapse_or_drop"] = "collapse"
    # when the caption and marks go in (annotation/reflectv/wording.py): into the teacher's feedback
    # before the first-person rewrite (002 Figures 11 then 12, the paper's), or into the rewrite after it
    caption_order: Literal["before_rewrite", "after_rewrite"] = "before_rewrite"
    seed: int = Field(default=0, ge=0)
    version: str = "1.0.0"
    # set by re-curation (``mmcurate recurate --add-model teacher=M`` / ``verifier=M``), not by
    # a curation run: teachers that score the released dialogues again (the trajectory rules
    # must hold under each) and vision models that check the released marks again (each must
    # say yes to every marked turn); see flows/reflectv/recurate.py
    recheck_teachers: list[str] = Field(default_factory=list)
    recheck_verifiers: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _student_and_teacher(self) -> ReflectVConfig:
        if (self.student is None) != (self.teacher is None):
            raise ValueError("reflectv needs both student and teacher, or neither (ingested dialogues only)")
        return self

    def roles(self, judge: str | None) -> list[tuple[str, str]]:
        roles: dict[str, Sequence[str | None]] = {
            "student": [self.student],
            "teacher": [self.teacher],
            "keywords": model_names(self.keywords),
            "rewriter": [self.rewriter],
            "pointing": model_names(self.grounding),
            "captions": model_names(self.captions),
            "verifier": [self.verifier],
            "judge": [judge],
            "recheck_teacher": self.recheck_teachers,
            "recheck_verifier": self.recheck_verifiers,
        }
        return [(role, name) for role, names in roles.items() for name in names if name]

    def check_models(self, models: Mapping[str, ModelSpec]) -> None:
        """A re-checking verifier looks at the marked images (its check is whether the marks
        show what the reflection names): a model without vision would only see the text and
        its no would be blamed on the marks. (A re-checking teacher is sent the image too, as
        the curation teacher is, but it scores against the ground truth: no vision needed.)"""
        blind = [name for name in self.recheck_verifiers if not models[name].vision]
        if blind:
            raise ValueError(
                f"reflectv verifier {blind[0]!r} does not see images (vision: false): a re-checking "
                "verifier must see the marks it checks; name a vision model"
            )

    def recuration_roles(self) -> tuple[str, ...]:
        return ("verifier", "teacher")

    def add_recuration_model(self, role: str, name: str) -> None:
        field = "recheck_verifiers" if role == "verifier" else "recheck_teachers"
        if name not in getattr(self, field):
            setattr(self, field, [*getattr(self, field), name])


BENCHMARK = Benchmark(
    name="reflectv",
    config=ReflectVConfig,
    curated=True,
    title="ReflectV (reflective, visually grounded multi-turn trajectories, MIRROR)",
    paper="002_6b46cea6506e7b47.txt",
    sources=("gqa", "textvqa", "docvqa", "chartqa", "fire"),
)
