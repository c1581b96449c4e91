"""ReflectV stage 4 (seed paper 002, sections 3.2 and 4.3): ground each keyword and draw its marks.

For every reflective turn of a sample still on its way to a chain: the grounder
(``grounders``) locates the turn's keyword in the original image (for Scene text, Document and
Chart, the keyword with the ground truth, ``locate_phrase``: 002 section 4.3 takes the place
from "ground truth annotations", the keyword's words never state it), SAM 2 turns the points
into masks when a segmenter is configured, and the marks are drawn on the original image
(``marks``; the paper's I_k = G(I_0, v_k)) in a colour and a mark type picked for the turn
(a seeded choice among ``reflectv.colors`` and ``reflectv.mark_types``, stable per sample
and turn). The marked image goes to the content-addressed image store. Once every reflective
turn of a sample is marked, it gets its caption and mark phrase (``wording``: "a red point"
for one mark, "red points" for several), which name the anchor, the colour and the mark type
the tool call will carry: inserted by a model (``captions: <model>``, Figure 11) or appended
by a template (``captions: template``, the offline stand-in). In the paper's order
(``caption_order: before_rewrite``, a ``rewriter`` given here) they go into the teacher's
feedback, and the rewriter then writes the result in the first person (Figure 12; the
rewrite must keep the caption, the colour and the mark); in the order before they go into
the first-person reflection the reflection stage wrote.

Nothing located, a grounder error, or an insertion or rewrite that stays unusable ends the
sample's way to a chain (``chain_issue``); every locate, drawing, insertion and rewrite is a
ledger row (an insertion's row records that it was checked not to state the ground truth).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.domains import DENSE_PERCEPTION, domain_of
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.specs import CaptionSpec, GroundingSpec, SegmenterSpec, Template, coerce
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.visual_prompts import COLORS, MARK_TYPES
from mmcurate.models.labels import ask_parsed

from ..grounders import Grounding, Instance, Query, Sam2Segmenter, make_grounder, open_image
from ..marks import draw_marks, png_bytes
from .chains import eligible, issues_of, require_chains, turns_of, with_chains
from .reflection import REWRITE_REMINDER, rewrite_parser, rewrite_request
from .wording import (
    INSERT_FEEDBACK_REMINDER,
    INSERT_REMINDER,
    SENTENCES,
    TEMPLATE_NAME,
    grounded_reflection,
    insertion_parser,
    insertion_request,
    mentions,
    seeded_index,
)

STAGE = "grounding"
CHECK_LOCATE = "grounding.locate.v1"
CHECK_MARKS = "grounding.marks.v1"
CHECK_CAPTION = "grounding.caption.v1"
CHECK_REWRITE = "grounding.rewrite.v1"
CHECK_SAMPLE = "grounding.sample.v1"


def _rounded(instances: list[Instance]) -> list[dict[str, Any]]:
    return [
        {
            "point": [round(v, 1) for v in i.point],
            **({"box": [round(v, 1) for v in i.box]} if i.box else {}),
            **({"mask_pixels": int(i.mask.sum())} if i.mask is not None else {}),
        }
        for i in instances
    ]


def locate_phrase(keyword: str, domain: str, answers: list[str]) -> str:
    """What the grounder looks for: the turn's keyword and, for a dense-perception turn, the first
    ground-truth answer after it, so the marks fall on the value or text the answer is (module
    docstring); the keyword itself, the anchor the turn shows, stays without it."""
    truth = next((a.strip() for a in answers if a.strip()), "")
    return f"{keyword} {truth}" if truth and domain in DENSE_PERCEPTION else keyword


@dataclass
class GroundAndMark(Stage):
    """Locate, mark and word every reflective turn (see the module docstring)."""

    grounding: GroundingSpec
    segmenter: SegmenterSpec | None = None
    colors: list[str] = field(default_factory=lambda: list(COLORS))
    mark_types: list[str] = field(default_factory=lambda: list(MARK_TYPES))
    seed: int = 0
    captions: CaptionSpec = field(default_factory=Template)
    rewriter: str | None = None  # given: caption into the feedback, then this model's first-person rewrite
    name = STAGE

    def __post_init__(self) -> None:
        self.grounding = coerce(GroundingSpec, self.grounding)
        self.segmenter = None if self.segmenter is None else coerce(SegmenterSpec, self.segmenter)
        self.captions = coerce(CaptionSpec, self.captions)

    @property
    def inserter(self) -> str:
        return TEMPLATE_NAME if isinstance(self.captions, Template) else f"llm:{self.captions.name}"

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        require_chains(samples, STAGE)
        rows, all_turns, issues = samples.to_pylist(), turns_of(samples), issues_of(samples)
        grounder = make_grounder(self.grounding)
        segmenter = Sam2Segmenter(self.segmenter) if self.segmenter is not None else None
        places = [
            (i, n)
            for i, (turns, issue) in enumerate(zip(all_turns, issues))
            if eligible(turns, issue)
            for n in range(len(turns) - 1)
        ]
        queries = [
            Query(
                f"{rows[i]['sample_id']}/t{n + 1}",
                rows[i]["images"][0],
                locate_phrase(all_turns[i][n]["keyword"], domain_of(rows[i]["meta"]), rows[i]["answers"]),
            )
            for i, n in places
        ]
        found = grounder.locate(queries, ctx) if queries else []
        decisions: list[Decision] = []
        marked = 0
        for (i, n), query, result in zip(places, queries, found):
            if issues[i] is not None:
                continue  # an earlier turn of this sample already failed
            sid, turn = rows[i]["sample_id"], all_turns[i][n]
            result = self._refined(ctx, query, result, segmenter)
            verdict = "error" if result.error else "found" if result.instances else "none"
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_LOCATE,
                    verdict,
                    model=grounder.name,
                    context_id=f"t{n + 1}",
                    detail={
                        "keyword": turn["keyword"],
                        "located": query.keyword,
                        "instances": _rounded(result.instances),
                        **result.detail,
                        **({"error": result.error} if result.error else {}),
                    },
                )
            )
            if verdict != "found":
                issues[i] = (
                    f"grounding: {'undetermined' if result.error else 'nothing located'} for "
                    f"{turn['keyword']!r} (turn {n + 1})"
                )
                continue
            color = self.colors[seeded_index(self.seed, sid, str(n), "color", modulo=len(self.colors))]
            mark_type = self.mark_types[seeded_index(self.seed, sid, str(n), "mark", modulo=len(self.mark_types))]
            image = draw_marks(open_image(ctx.store, query.image), result.instances, color, mark_type)
            sha = ctx.store.put(png_bytes(image))
            turn.update(color=color, mark_type=mark_type, marks=len(result.instances), marked_image=sha)
            marked += 1
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_MARKS,
                    "drawn",
                    context_id=f"t{n + 1}",
                    detail={"color": color, "mark_type": mark_type, "marks": len(result.instances), "image": sha},
                )
            )
        inserted = [(i, n) for i, n in places if issues[i] is None]
        self._insert(ctx, rows, all_turns, issues, inserted, decisions)
        if self.rewriter is not None:
            self._rewrite(ctx, rows, all_turns, issues, [(i, n) for i, n in inserted if issues[i] is None], decisions)
        grounded = sorted({i for i, _ in places})
        for i in grounded:
            decisions.append(
                Decision(
                    rows[i]["sample_id"],
                    STAGE,
                    CHECK_SAMPLE,
                    "chain" if issues[i] is None else "collapse",
                    detail={"reason": issues[i] or "every reflective turn is marked"},
                )
            )
        counts = {
            "input": len(rows),
            "turns": len(queries),
            "marked": marked,
            "captions_unusable": sum(d.check == CHECK_CAPTION and d.verdict != "ok" for d in decisions),
            "rewrites_unusable": sum(d.check == CHECK_REWRITE and d.verdict != "ok" for d in decisions),
            "chains": sum(issues[i] is None for i in grounded),
        }
        components = {
            "grounding": grounder.name,
            "captions": self.inserter,
            **({"segmenter": segmenter.name} if segmenter else {}),
            **({"rewriter": self.rewriter} if self.rewriter else {}),
        }
        return StageResult(
            stage=STAGE,
            kept=with_chains(samples, all_turns, issues),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            components=components,
        )

    def _insert(
        self,
        ctx: StageContext,
        rows: list[dict[str, Any]],
        all_turns: list[list[dict[str, Any]]],
        issues: list[str | None],
        places: list[tuple[int, int]],
        decisions: list[Decision],
    ) -> None:
        """Give every marked turn of ``places`` its text with the caption and the marks inserted
        (see the module docstring): the think text, or, before the rewrite, the feedback to rewrite."""
        turns = [all_turns[i][n] for i, n in places]
        first_person = self.rewriter is None
        texts = [t["reflection"] if first_person else t["feedback"] for t in turns]
        if any(text is None for text in texts):
            raise MmcurateError(
                "the grounding stage inserts captions into the reflection stage's rewrites; with "
                "caption_order before_rewrite it needs the rewriter instead"
            )
        if isinstance(self.captions, Template):
            replies: list[Any] = [None] * len(places)
            thinks = [
                grounded_reflection(
                    text,
                    t["keyword"],
                    t["color"],
                    t["mark_type"],
                    t["marks"],
                    seeded_index(self.seed, rows[i]["sample_id"], str(n), "sentence", modulo=len(SENTENCES)),
                    first_person,
                )
                for (i, n), t, text in zip(places, turns, texts)
            ]
        else:
            requests = [
                insertion_request(
                    f"{rows[i]['sample_id']}/t{n + 1}",
                    text,
                    t["keyword"],
                    t["color"],
                    t["mark_type"],
                    t["marks"],
                    first_person,
                )
                for (i, n), t, text in zip(places, turns, texts)
            ]
            parsers = [
                insertion_parser(text, t["keyword"], t["color"], t["mark_type"], rows[i]["answers"], first_person)
                for (i, n), t, text in zip(places, turns, texts)
            ]
            try:
                replies = (
                    ask_parsed(
                        ctx.pool.client(self.captions.name),
                        requests,
                        parsers,
                        INSERT_REMINDER if first_person else INSERT_FEEDBACK_REMINDER,
                        STAGE,
                        "the text with the caption and marks",
                    )
                    if requests
                    else []
                )
            finally:
                ctx.pool.release(self.captions.name)
            thinks = [reply.label for reply in replies]
        into = "reflection" if first_person else "feedback"
        for (i, n), turn, text, think, reply in zip(places, turns, texts, thinks, replies):
            truths = rows[i]["answers"]
            verdict = "ok" if think else "error" if reply.raw and reply.raw[-1] is None else "unusable"
            detail: dict[str, Any] = {
                "by": self.inserter,
                "into": into,
                "caption": turn["keyword"],
                "text": think,
                "answer_mentions": {
                    into: mentions(text, truths),
                    "caption": mentions(turn["keyword"], truths),
                    "text": mentions(think, truths) if think else None,
                },
            }
            if reply is not None:
                detail.update(raw=reply.raw, **({"error": reply.error} if reply.error else {}))
            decisions.append(
                Decision(
                    rows[i]["sample_id"],
                    STAGE,
                    CHECK_CAPTION,
                    verdict,
                    model=None if reply is None or isinstance(self.captions, Template) else self.captions.name,
                    context_id=f"t{n + 1}",
                    detail=detail,
                )
            )
            if think:
                turn["think"] = think
            elif issues[i] is None:
                issues[i] = f"grounding: caption insertion {verdict} (turn {n + 1})"

    def _rewrite(
        self,
        ctx: StageContext,
        rows: list[dict[str, Any]],
        all_turns: list[list[dict[str, Any]]],
        issues: list[str | None],
        places: list[tuple[int, int]],
        decisions: list[Decision],
    ) -> None:
        """Figure 12 after Figure 11: the feedback with its caption and marks, rewritten in the
        first person; the rewrite must still name the caption, the colour and the mark."""
        assert self.rewriter is not None
        turns = [all_turns[i][n] for i, n in places]
        requests = [rewrite_request(f"{rows[i]['sample_id']}/t{n + 1}", t["think"]) for (i, n), t in zip(places, turns)]
        parsers = [
            rewrite_parser(t["think"], rows[i]["answers"], (t["keyword"], t["color"], t["mark_type"]))
            for (i, _), t in zip(places, turns)
        ]
        try:
            replies = (
                ask_parsed(
                    ctx.pool.client(self.rewriter), requests, parsers, REWRITE_REMINDER, STAGE, "a first-person rewrite"
                )
                if requests
                else []
            )
        finally:
            ctx.pool.release(self.rewriter)
        for (i, n), turn, reply in zip(places, turns, replies):
            verdict = "ok" if reply.ok else "error" if reply.raw and reply.raw[-1] is None else "unusable"
            decisions.append(
                Decision(
                    rows[i]["sample_id"],
                    STAGE,
                    CHECK_REWRITE,
                    verdict,
                    model=self.rewriter,
                    context_id=f"t{n + 1}",
                    detail={
                        "feedback": turn["think"],
                        "reflection": reply.label,
                        "raw": reply.raw,
                        **({"error": reply.error} if reply.error else {}),
                    },
                )
            )
            turn["think"] = turn["reflection"] = reply.label
            if not reply.ok and issues[i] is None:
                issues[i] = f"grounding: rewrite {verdict} (turn {n + 1})"

    @staticmethod
    def _refined(ctx: StageContext, query: Query, result: Grounding, segmenter: Sam2Segmenter | None) -> Grounding:
        if segmenter is None or result.error or not result.instances:
            return result
        instances = segmenter.refine(open_image(ctx.store, query.image), result.instances)
        return Grounding(instances, {**result.detail, "segmenter": segmenter.name})
