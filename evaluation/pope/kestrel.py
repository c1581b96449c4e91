"""Kestrel (seed 000) around a vision model, as its paper runs it on POPE: grounded evidence,
claim-level verification and evidence-gated, stateful self-refinement.

For each question (one POPE probe), at most ``gate.max_rounds`` rounds (K = 3):

0. Initialization (3.1, Figure 7): the model answers Yes or No and states one verifiable
   claim of the type the question asks (``judging.claim_extraction.heuristic_type``: POPE's
   "Is there a ...?" is existence), with its targets (one object noun; one or two for
   position). With ``yes_guard`` (the appendix's optional Yes-guard, off by default as in the
   main text) an initial Yes is asked again; a "no" with high confidence makes it No.
Each round:
1. Agent grounding (3.2): the pluggable grounder (``evaluation.pope.kestrel.grounding``:
   annotated boxes or a pointing model; SAM 2 masks with a ``segmenter``) locates every
   target. Visual evidence, stored as images: ``e_seg_<t>`` the overlay (masks where the
   grounder gives them, else boxes) and ``e_crop_<t>`` the crop-and-zoom of the target's
   union box. Textual evidence derived from the geometry: ``e_count_<t>`` (how many
   instances, and so whether the target exists: more than zero) for existence and count
   claims; ``e_color_<t>`` for colour (the model names the colour of the crop, shown with the
   whole image); ``e_pos_<t>`` for position (where the union box lies, by thirds) and, for a
   claim about two targets, ``e_posrel_<claim>`` (the relation of their box centres).
2. Claim-level verification (3.3, Figure 8): the verifier (the model itself unless
   ``verifier`` names another) judges each claim against the evidence only and returns the
   record of ``judging.claims`` (status, confidence, why, citations of shown ids only); from
   round 2 it also sees its previous record. The verdict rule and the change gate are
   ``judging.claims``'.
3. Self-refinement (3.4, Figure 9): the model sees the question, its current answer, every
   earlier round (claims, evidence, verdict, answer) and this one, and proposes an answer
   and a new claim for the next round.
4. Evidence-gated update: the proposed answer replaces the current one only when this
   round passed the change gate (a decisive verdict, confident at its claim type's threshold
   in [0.82, 0.90] and backed by cited evidence); otherwise the answer stays and the next
   round looks for stronger evidence. A contradiction does not end the rounds.

Stop (``judging.claims.stop_reason``): ``stable_rounds`` (2) supported rounds in a row with
the answer unchanged over them, ``max_rounds``, an error (a reply unreadable after one
retry: the answer stays as it is, the trace says why), or, from round 2, a round that yields
no stronger evidence than the one before (``judging.claims.stronger_evidence``: no evidence
item it did not show, no claim checked more confidently; 3.4's "when additional iterations
no longer yield stronger evidence"). Every reply is read strictly
(``models.labels.ask_parsed``); an initialization that fails fails the item.

The trace of every item (``KestrelItem.trace``) holds each step: what the grounder found,
the evidence with its ids (and images), the verifier's record, the rule's verdict, the gate,
the proposed and the kept answer.

SAM3's confidence thresholds (4.1, implementation details: 0.5, "with a recheck threshold of
0.35 when needed for existence claim"; ``detection_threshold``, ``recheck_threshold``): an
instance the grounder scores below the detection threshold is left out; a target of an
existence claim left with no instance is looked at again at the recheck threshold (the trace's
``found`` says so). Grounders that give no score (annotated boxes, a pointing model) keep every
instance. The run records both thresholds (``release.json``'s ``detector``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from PIL import Image

from mmcurate.annotation.grounders import Grounder, Instance, Query, Sam2Segmenter, open_image
from mmcurate.annotation.marks import box_of, draw_marks, png_bytes
from mmcurate.benchmarks.pope import KestrelConfig
from mmcurate.core.plural import counted
from mmcurate.core.stages import StageContext
from mmcurate.judging.claim_extraction import MAX_CLAIMS, claim_of, claims_json
from mmcurate.judging.claim_verification import REMINDER as VERIFY_REMINDER
from mmcurate.judging.claim_verification import SYSTEM as VERIFY_SYSTEM
from mmcurate.judging.claims import (
    ERROR,
    Claim,
    Evidence,
    Round,
    VerifierRecord,
    judge_round,
    parse_record,
    stop_reason,
    stronger_evidence,
)
from mmcurate.models.json_replies import json_object
from mmcurate.models.labels import Label, RecordError, ask_parsed
from mmcurate.models.requests import ChatRequest

STAGE = "kestrel"
YES, NO = "Yes", "No"
INIT_TEMPLATE, GUARD_TEMPLATE = "kestrel.init.v1", "kestrel.yes_guard.v1"
VERIFY_TEMPLATE, REFINE_TEMPLATE, COLOUR_TEMPLATE = "kestrel.verify.v1", "kestrel.refine.v1", "kestrel.colour.v1"
COUNT_TEMPLATE = "kestrel.count.v1"
MAX_TOKENS = 384
OVERLAY_COLOUR = "red"
CROP_PAD = 0.15  # share of the union box added on each side before zooming
CROP_MAX_SIDE = 1024

INIT_SYSTEM = (
    "You are given an image and a Yes/No question. Decide the answer and state one claim that can be checked "
    'in the image and decides the question. The answer is exactly "Yes" or "No". The claim has an id, a '
    "type, a text and its targets; its type is the one asked for; its text is concrete and visually checkable; "
    "its targets are, for position, one or two short object phrases ([subject, anchor] for a relation between "
    "two objects), otherwise exactly one object noun from the question, without colour, number or position "
    'words. Reply with JSON only: {"answer": "Yes|No", "verifiable_claims": [{"id": "c1", "type": '
    '"...", "text": "...", "targets": ["..."]}]}'
)
GUARD_SYSTEM = (
    "Check whether the Yes/No question is true in this image, from the image only, and be conservative when "
    "the evidence is weak: yes when clearly true, no when clearly false, otherwise unclear. Reply with JSON "
    'only: {"answer": "yes|no|unclear", "confidence": "high|medium|low", "reason": "one short '
    'sentence"}'
)
REFINE_SYSTEM = (
    "You are a cautious VQA assistant deciding the final Yes/No answer to a question about the image. Use "
    "everything you are given: the earlier rounds (claims, evidence, verdicts, answers) and this round's "
    "claims, evidence and verification. Answer exactly Yes or No. Also state one new claim for the next "
    "round: it must directly verify the question's Yes/No, mention an entity, attribute or relation of the "
    "question, have the type asked for, and follow the target rules (position: one or two short object "
    "phrases, [subject, anchor] for a relation; otherwise exactly one object noun without colour, number, "
    'position or quantity words). Reply with JSON only: {"new_claims": [{"id": "c1", "type": "...", '
    '"text": "...", "targets": ["..."], "priority": 1}], "Answer": "Yes|No"}'
)
VERIFY_IDS = (
    " Evidence ids say what they hold: e_seg_<target> an overlay of the target's instances, e_crop_<target> a "
    "crop-and-zoom of them, e_count_<target> how many instances were found, e_countcmp_<target> that count "
    "against the number claimed, e_countvis_<target> the model's own count in the image, e_countviscmp_<target> "
    "that count against the number claimed, e_color_<target> a colour "
    "observation, e_pos_<target> where the target is, e_posrel_<claim> how two targets lie to each other."
)
COLOUR_SYSTEM = (
    "Name the main colour of the object in the first image, a crop of the second. Reply with the "
    "colour only, in one to three words."
)
JSON_REMINDER = "Your reply could not be used. Reply with the JSON object only, in exactly the format asked for"
COLOUR_REMINDER = "Your reply could not be used. Reply with the colour only, in one to three words."
COUNT_SYSTEM = (
    "Count the instances of the object in the image (the ones a detector found, if any, are outlined in "
    "red; count what you see). Reply with a whole number only."
)
COUNT_REMINDER = "Your reply could not be used. Reply with a whole number only, such as 0, 1 or 3."
NUMBER_WORDS = {
    w: n
    for n, w in enumerate(
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    )
}
_MARKUP = re.compile(r"[<>{}\[\]*`#|\\]")


# ---------------------------------------------------------------------------- replies
def answer_word(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return YES if value.strip().lower() == "yes" else NO
    raise RecordError(f"answer {value!r} is not Yes or No")


def checked_claim(raw: Any, expected: str, optional: frozenset[str] = frozenset()) -> Claim:
    """A claim record of the ``expected`` type with targets by the paper's rules."""
    claim = claim_of(raw, optional)
    if claim.type != expected:
        raise RecordError(f"claim {claim.id}: type {claim.type!r}, but {expected!r} was asked for")
    most = 2 if expected == "position" else 1
    if not 1 <= len(claim.targets) <= most or not all(t.strip() for t in claim.targets):
        raise RecordError(f"claim {claim.id}: give {'one or two targets' if most == 2 else 'exactly one target'}")
    return Claim(claim.id, claim.type, claim.text, tuple(t.strip() for t in claim.targets))


def parse_initial(expected: str) -> Callable[[str], tuple[str, list[Claim]]]:
    def parse(text: str) -> tuple[str, list[Claim]]:
        raw = json_object(text)
        if set(raw) != {"answer", "verifiable_claims"}:
            raise RecordError('a reply has exactly the keys "answer" and "verifiable_claims"')
        claims = raw["verifiable_claims"]
        if not isinstance(claims, list) or len(claims) != 1:
            raise RecordError("give exactly one claim in verifiable_claims")
        return answer_word(raw["answer"]), [checked_claim(claims[0], expected)]

    return parse


def parse_refined(expected: str) -> Callable[[str], tuple[str, list[Claim]]]:
    def parse(text: str) -> tuple[str, list[Claim]]:
        raw = json_object(text)
        if set(raw) != {"new_claims", "Answer"}:
            raise RecordError('a reply has exactly the keys "new_claims" and "Answer"')
        claims = raw["new_claims"]
        if not isinstance(claims, list) or not 1 <= len(claims) <= MAX_CLAIMS:
            raise RecordError(f"give 1 to {MAX_CLAIMS} new claims")
        parsed = [checked_claim(c, expected, frozenset({"priority"})) for c in claims]
        if len({c.id for c in parsed}) != len(parsed):
            raise RecordError("two claims share an id")
        return answer_word(raw["Answer"]), parsed

    return parse


def parse_guard(text: str) -> dict[str, str]:
    raw = json_object(text)
    if set(raw) != {"answer", "confidence", "reason"}:
        raise RecordError('a reply has exactly the keys "answer", "confidence" and "reason"')
    if raw["answer"] not in ("yes", "no", "unclear") or raw["confidence"] not in ("high", "medium", "low"):
        raise RecordError("answer is yes, no or unclear; confidence is high, medium or low")
    if not isinstance(raw["reason"], str):
        raise RecordError("reason is not a string")
    return {k: raw[k] for k in ("answer", "confidence", "reason")}


def parse_count(text: str) -> int | None:
    line = text.strip().strip(".").strip().lower()
    return int(line) if line.isdigit() and int(line) < 1000 else NUMBER_WORDS.get(line)


def claimed_count(text: str) -> int | None:
    """The number a count claim states (its first numeral or number word), or None."""
    for word in re.findall(r"[a-z]+|\d+", text.lower()):
        if word.isdigit():
            return int(word)
        if word in NUMBER_WORDS:
            return NUMBER_WORDS[word]
    return None


def compared(what: str, target: str, found: int, claimed: int) -> str:
    """A count against the number claimed, as text evidence."""
    side = "as many as" if found == claimed else "fewer than" if found < claimed else "more than"
    return f"{what} {found} '{target}'; the claim says {claimed}: {side} claimed."


def parse_colour(text: str) -> str | None:
    line = text.strip().strip("\"'.").strip()
    return line if line and "\n" not in line and not _MARKUP.search(line) and len(line.split()) <= 3 else None


# ---------------------------------------------------------------------------- evidence
def target_key(target: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", target.lower()).strip("_") or "target"


def union_box(instances: list[Instance], width: int, height: int) -> tuple[float, float, float, float]:
    boxes = [box_of(i, width, height) for i in instances]
    return min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes)


def _third(value: float, size: int, words: tuple[str, str, str]) -> str:
    return words[min(2, int(3 * value / max(size, 1)))]


def where(box: tuple[float, float, float, float], width: int, height: int) -> str:
    """Where a box's centre lies, by thirds of the image: "the top left", "the centre", ..."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    row, column = _third(y, height, ("top", "middle", "bottom")), _third(x, width, ("left", "centre", "right"))
    return "the centre" if (row, column) == ("middle", "centre") else f"the {row} {column}".replace(" middle ", " ")


def relation(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> str:
    """How box ``a`` lies to box ``b`` by their centres, the larger offset first: "left of and above", ..."""
    dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2
    dy = (a[1] + a[3]) / 2 - (b[1] + b[3]) / 2
    parts = [
        (abs(d), word)
        for d, word in ((dx, "left of" if dx < 0 else "right of"), (dy, "above" if dy < 0 else "below"))
        if d
    ]
    return " and ".join(word for _, word in sorted(parts, key=lambda p: -p[0])) or "centred on"


@dataclass
class Found:
    """One target located in one round."""

    target: str
    instances: list[Instance]
    detail: dict[str, Any]
    error: str | None = None


def crop_zoom(image: Image.Image, box: tuple[float, float, float, float], zoom: float) -> Image.Image:
    pad_x, pad_y = CROP_PAD * (box[2] - box[0]), CROP_PAD * (box[3] - box[1])
    area = (
        max(0, int(box[0] - pad_x)),
        max(0, int(box[1] - pad_y)),
        min(image.width, int(box[2] + pad_x) + 1),
        min(image.height, int(box[3] + pad_y) + 1),
    )
    crop = image.crop(area)
    scale = min(zoom, CROP_MAX_SIDE / max(crop.size))
    return crop.resize(
        (max(1, round(crop.width * scale)), max(1, round(crop.height * scale))), Image.Resampling.LANCZOS
    )


# ---------------------------------------------------------------------------- the loop
def _parse_shown(claims: list[Claim], shown: list[Evidence], text: str) -> VerifierRecord:
    """``parse_record`` of a reply to a verifier request that showed ``shown``."""
    return parse_record(text, claims, shown)


@dataclass
class KestrelItem:
    key: str
    image: str  # sha256 in the image store
    question: str
    claim_type: str
    hint: str  # the target the question names, as the prompts' example
    answer: str | None = None
    initial: str | None = None
    claims: list[Claim] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # the answer before round 1 and after each round
    trace: dict[str, Any] = field(default_factory=dict)
    stopped: str | None = None
    error: str | None = None

    @property
    def open(self) -> bool:
        return self.stopped is None


class Kestrel:
    """The loop of the module docstring, batched: each step asks for every open item at once."""

    def __init__(
        self,
        ctx: StageContext,
        model: str,
        config: KestrelConfig,
        grounder: Grounder,
        segmenter: Sam2Segmenter | None = None,
    ) -> None:
        self.ctx, self.model, self.config = ctx, model, config
        self.verifier = config.verifier or model
        self.grounder, self.segmenter = grounder, segmenter

    # -- asking
    def _ask(
        self, model: str, requests: list[ChatRequest], parsers: list[Callable[[str], Any]], reminder: str, expected: str
    ) -> list[Label]:
        if not requests:
            return []
        try:
            return ask_parsed(self.ctx.pool.client(model), requests, parsers, reminder, STAGE, expected)
        finally:
            self.ctx.pool.release(model)

    def run(self, items: list[KestrelItem]) -> list[KestrelItem]:
        self._initialise(items)
        if self.config.yes_guard:
            self._yes_guard([i for i in items if i.answer == YES])
        for item in items:
            item.held = [item.answer] if item.answer else []
            item.trace["rounds"] = []
        while any(i.open for i in items):
            self._round([i for i in items if i.open])
        for item in items:
            item.trace.update(stopped=item.stopped, final=item.answer)
        return items

    def _initialise(self, items: list[KestrelItem]) -> None:
        requests = [
            ChatRequest(
                f"{i.key}/init",
                [
                    {"role": "system", "content": INIT_SYSTEM},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "sha256": i.image},
                            {
                                "type": "text",
                                "text": f'Claim type: {i.claim_type}\nExample targets: ["{i.hint}"]\n'
                                f"Question: {i.question}\nReply with the JSON object only.",
                            },
                        ],
                    },
                ],
                INIT_TEMPLATE,
                max_tokens=MAX_TOKENS,
            )
            for i in items
        ]
        labels = self._ask(
            self.model, requests, [parse_initial(i.claim_type) for i in items], JSON_REMINDER, "an answer and one claim"
        )
        for item, label in zip(items, labels):
            item.trace = {
                "system": "kestrel",
                "claim_type": item.claim_type,
                "thresholds": dict(self.config.gate.thresholds),
                "initial": {"raw": label.raw},
            }
            if not label.ok:
                item.error, item.stopped = f"initialization: {label.error}", ERROR
                continue
            item.answer = item.initial = label.label[0]
            item.claims = label.label[1]
            item.trace["initial"].update(answer=item.answer, claims=[c.as_json() for c in item.claims])

    def _yes_guard(self, items: list[KestrelItem]) -> None:
        requests = [
            ChatRequest(
                f"{i.key}/guard",
                [
                    {"role": "system", "content": GUARD_SYSTEM},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "sha256": i.image},
                            {
                                "type": "text",
                                "text": f"Question: {i.question}\nTarget hint: {i.hint}\nReply with the JSON object only.",
                            },
                        ],
                    },
                ],
                GUARD_TEMPLATE,
                max_tokens=MAX_TOKENS,
            )
            for i in items
            if i.open
        ]
        guarded = [i for i in items if i.open]
        for item, label in zip(
            guarded,
            self._ask(self.model, requests, [parse_guard] * len(requests), JSON_REMINDER, "the Yes-guard's JSON"),
        ):
            turned = label.ok and label.label["answer"] == "no" and label.label["confidence"] == "high"
            item.trace["yes_guard"] = {
                **(label.label or {}),
                "raw": label.raw,
                "error": label.error,
                "changed": bool(turned),
            }
            if turned:
                item.answer = NO

    # -- one round
    def _round(self, items: list[KestrelItem]) -> None:
        found = self._ground(items)
        evidence = self._evidence(items, found)
        self._verify(items, evidence, found)
        self._refine([i for i in items if i.rounds and i.rounds[-1].verdict != ERROR], evidence)
        for item in items:
            if item.stopped is None:
                item.stopped = stop_reason(item.rounds, self.config.gate, item.held) or self._weaker(item)

    @staticmethod
    def _weaker(item: KestrelItem) -> str | None:
        """ "no_stronger_evidence" when this round yields nothing stronger than the one before."""
        if len(item.rounds) < 2:
            return None
        before, now = ([(e["id"], e["text"]) for e in r["evidence"]] for r in item.trace["rounds"][-2:])
        if stronger_evidence(before, now, item.rounds[-2].record, item.rounds[-1].record):
            return None
        return "no_stronger_evidence"

    def _ground(self, items: list[KestrelItem]) -> dict[tuple[str, str], Found]:
        wanted = list(dict.fromkeys((i.key, t) for i in items for c in i.claims for t in c.targets))
        existence = {(i.key, t) for i in items for c in i.claims if c.type == "existence" for t in c.targets}
        images = {i.key: i.image for i in items}
        queries = [Query(f"{key}/{target_key(t)}", images[key], t) for key, t in wanted]
        located = self.grounder.locate(queries, self.ctx) if queries else []
        out = {}
        for (key, target), query, result in zip(wanted, queries, located):
            instances, detail = self._confident(result.instances, (key, target) in existence, result.detail)
            if self.segmenter is not None and instances and not result.error:
                instances = self.segmenter.refine(open_image(self.ctx.store, query.image), instances)
            out[(key, target)] = Found(target, instances, detail, result.error)
        return out

    def _confident(
        self, instances: list[Instance], existence: bool, detail: dict[str, Any]
    ) -> tuple[list[Instance], dict[str, Any]]:
        """The instances at SAM3's detection threshold, or at its recheck threshold for an existence
        target that has none (module docstring); the detail says what the thresholds left out."""
        threshold = self.config.detection_threshold
        kept = [i for i in instances if i.score is None or i.score >= threshold]
        if not kept and existence and instances:
            threshold = self.config.recheck_threshold
            kept = [i for i in instances if i.score is None or i.score >= threshold]
            detail = {**detail, "recheck_threshold": threshold}
        if len(kept) < len(instances):
            detail = {
                **detail,
                "below_threshold": [round(i.score, 3) for i in instances if i.score is not None and i not in kept],
            }
        return kept, detail

    def _evidence(self, items: list[KestrelItem], found: dict[tuple[str, str], Found]) -> dict[str, list[Evidence]]:
        """Each item's evidence items this round (``Evidence.source``: an image's sha256, or None for text)."""
        out: dict[str, list[Evidence]] = {}
        colour_asks: list[tuple[KestrelItem, str, str, str]] = []  # item, target, crop sha, evidence id
        count_asks: list[tuple[KestrelItem, str, str, str, int | None]] = []  # item, target, image, key, claimed
        for item in items:
            picture = open_image(self.ctx.store, item.image)
            width, height = picture.size
            made: dict[str, Evidence] = {}
            for claim in item.claims:
                for target in claim.targets:
                    hit, key = found[(item.key, target)], target_key(target)
                    n = len(hit.instances)
                    if hit.error:
                        made.setdefault(
                            f"e_count_{key}",
                            Evidence(
                                f"e_count_{key}", f"The grounding agent could not look for '{target}': {hit.error}"
                            ),
                        )
                        continue
                    if n and f"e_seg_{key}" not in made:
                        kind = "mask" if any(i.mask is not None for i in hit.instances) else "bbox"
                        overlay = self.ctx.store.put(
                            png_bytes(draw_marks(picture, hit.instances, OVERLAY_COLOUR, kind))
                        )
                        made[f"e_seg_{key}"] = Evidence(
                            f"e_seg_{key}",
                            f"(image) the {counted(n, 'instance')} of '{target}' found, "
                            f"{'segmented' if kind == 'mask' else 'boxed'} in {OVERLAY_COLOUR}",
                            overlay,
                        )
                        box = union_box(hit.instances, width, height)
                        crop = self.ctx.store.put(png_bytes(crop_zoom(picture, box, self.config.zoom)))
                        made[f"e_crop_{key}"] = Evidence(
                            f"e_crop_{key}", f"(image) crop-and-zoom ({self.config.zoom:g}x) of '{target}'", crop
                        )
                    if claim.type in ("existence", "count"):
                        made[f"e_count_{key}"] = Evidence(
                            f"e_count_{key}",
                            (
                                f"The grounding agent found {counted(n, 'instance')} of '{target}': '{target}' is present in "
                                f"the image."
                                if n
                                else f"The grounding agent found 0 instances of '{target}': no '{target}' was found in the image."
                            ),
                        )
                    if claim.type == "count":
                        claimed = claimed_count(claim.text)
                        if claimed is not None:
                            made[f"e_countcmp_{key}"] = Evidence(
                                f"e_countcmp_{key}", compared("The grounding agent found", target, n, claimed)
                            )
                        shown = made[f"e_seg_{key}"].source if f"e_seg_{key}" in made else item.image
                        count_asks.append((item, target, shown or item.image, key, claimed))
                    elif claim.type == "colour":
                        if n:
                            colour_asks.append((item, target, made[f"e_crop_{key}"].source or "", f"e_color_{key}"))
                        else:
                            made[f"e_color_{key}"] = Evidence(f"e_color_{key}", f"No '{target}' was found to look at.")
                    elif claim.type == "position":
                        made[f"e_pos_{key}"] = Evidence(
                            f"e_pos_{key}",
                            (
                                f"The {counted(n, 'instance')} of '{target}' {'lies' if n == 1 else 'lie'} in "
                                f"{where(union_box(hit.instances, width, height), width, height)} "
                                f"of the image."
                                if n
                                else f"No '{target}' was found, so it has no position."
                            ),
                        )
                if claim.type == "position" and len(claim.targets) == 2:
                    a, b = (found[(item.key, t)] for t in claim.targets)
                    text = (
                        f"'{a.target}' is {relation(union_box(a.instances, width, height), union_box(b.instances, width, height))} "
                        f"'{b.target}' (by the centres of their boxes)."
                        if a.instances and b.instances
                        else f"The relation cannot be read: '{a.target if not a.instances else b.target}' was not found."
                    )
                    made[f"e_posrel_{claim.id}"] = Evidence(f"e_posrel_{claim.id}", text)
            out[item.key] = list(made.values())
        self._colours(colour_asks, out)
        self._counts(count_asks, out)
        return out

    def _counts(
        self, asks: list[tuple[KestrelItem, str, str, str, int | None]], out: dict[str, list[Evidence]]
    ) -> None:
        """Count-vision evidence: the model counts the target itself (and against the claim's number)."""
        requests = [
            ChatRequest(
                f"{item.key}/e_countvis_{key}/r{len(item.rounds) + 1}",
                [
                    {"role": "system", "content": COUNT_SYSTEM},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "sha256": image},
                            {"type": "text", "text": f"Object: {target}\nReply with a number only."},
                        ],
                    },
                ],
                COUNT_TEMPLATE,
                max_tokens=8,
            )
            for item, target, image, key, _ in asks
        ]
        labels = self._ask(self.model, requests, [parse_count] * len(asks), COUNT_REMINDER, "a whole number")
        for (item, target, _, key, claimed), label in zip(asks, labels):
            if not label.ok:
                out[item.key].append(
                    Evidence(f"e_countvis_{key}", f"No count could be read for '{target}' ({label.error}).")
                )
                continue
            out[item.key].append(
                Evidence(f"e_countvis_{key}", f"The model counts {label.label} '{target}' in the image.")
            )
            if claimed is not None:
                out[item.key].append(
                    Evidence(f"e_countviscmp_{key}", compared("The model counts", target, label.label, claimed))
                )

    def _colours(self, asks: list[tuple[KestrelItem, str, str, str]], out: dict[str, list[Evidence]]) -> None:
        requests = [
            ChatRequest(
                f"{item.key}/{eid}",
                [
                    {"role": "system", "content": COLOUR_SYSTEM},
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "sha256": crop},
                            {"type": "image", "sha256": item.image},
                            {"type": "text", "text": f"Object: {target}\nReply with the colour only."},
                        ],
                    },
                ],
                COLOUR_TEMPLATE,
                max_tokens=16,
            )
            for item, target, crop, eid in asks
        ]
        for (item, target, _, eid), label in zip(
            asks, self._ask(self.model, requests, [parse_colour] * len(asks), COLOUR_REMINDER, "a colour")
        ):
            text = (
                f"The model sees the '{target}' crop as {label.label}."
                if label.ok
                else f"No colour could be read for '{target}' ({label.error})."
            )
            out[item.key].append(Evidence(eid, text))

    def _verify(
        self, items: list[KestrelItem], evidence: dict[str, list[Evidence]], found: dict[tuple[str, str], Found]
    ) -> None:
        requests: list[ChatRequest] = []
        parsers: list[Callable[[str], Any]] = []
        for item in items:
            shown = evidence[item.key]
            lines = [f"Question: {item.question}", f"Claims: {claims_json(item.claims)}", "Evidence:"]
            lines += [f"[{e.id}] {e.text}" for e in shown]
            if item.rounds and item.rounds[-1].record is not None:
                lines.append(
                    f"Previous verdict (round {item.rounds[-1].number}): "
                    f"{json.dumps(item.rounds[-1].record.as_json(), ensure_ascii=False)}"
                )
            lines.append("Reply with the JSON record only.")
            parts = [
                {"type": "text", "text": "\n".join(lines)},
                *({"type": "image", "sha256": e.source} for e in shown if e.source),
            ]
            requests.append(
                ChatRequest(
                    f"{item.key}/r{len(item.rounds) + 1}",
                    [{"role": "system", "content": VERIFY_SYSTEM + VERIFY_IDS}, {"role": "user", "content": parts}],
                    VERIFY_TEMPLATE,
                    max_tokens=MAX_TOKENS,
                )
            )
            parsers.append(partial(_parse_shown, item.claims, shown))
        labels = self._ask(self.verifier, requests, parsers, VERIFY_REMINDER, "a verifier record")
        for item, label in zip(items, labels):
            judged = judge_round(
                len(item.rounds) + 1, label.label, item.claims, self.config.gate, label.raw, label.error
            )
            item.rounds.append(judged)
            item.trace["rounds"].append(
                {
                    "round": judged.number,
                    "claims": [c.as_json() for c in item.claims],
                    "found": {
                        t: {"instances": len(f.instances), **f.detail} for (k, t), f in found.items() if k == item.key
                    },
                    "evidence": [
                        {"id": e.id, "text": e.text, **({"image": e.source} if e.source else {})}
                        for e in evidence[item.key]
                    ],
                    "record": judged.record.as_json() if judged.record else None,
                    "verdict": judged.verdict,
                    "gated": judged.gated,
                    "answer_before": item.answer,
                    "raw": label.raw,
                    **({"error": label.error} if label.error else {}),
                }
            )
            if judged.verdict == ERROR:
                item.held.append(item.answer or "")

    def _refine(self, items: list[KestrelItem], evidence: dict[str, list[Evidence]]) -> None:
        requests = []
        for item in items:
            now = item.trace["rounds"][-1]
            history = [
                {
                    "round": r["round"],
                    "claims": r["claims"],
                    "evidence": {e["id"]: e["text"] for e in r["evidence"]},
                    "verdict": r["verdict"],
                    "answer": r.get("answer_after", r["answer_before"]),
                }
                for r in item.trace["rounds"][:-1]
            ]
            current = {
                "claims": now["claims"],
                "evidence": {e["id"]: e["text"] for e in now["evidence"]},
                "verification": now["record"],
            }
            text = (
                f'Question: {item.question}\nClaim type: {item.claim_type}\nExample targets: ["{item.hint}"]\n'
                f"Current answer: {item.answer}\nRound history: {json.dumps(history, ensure_ascii=False)}\n"
                f"This round: {json.dumps(current, ensure_ascii=False)}\n"
                f"This round's verdict: {now['verdict']}\nReply with the JSON object only."
            )
            requests.append(
                ChatRequest(
                    f"{item.key}/r{now['round']}/refine",
                    [
                        {"role": "system", "content": REFINE_SYSTEM},
                        {
                            "role": "user",
                            "content": [{"type": "image", "sha256": item.image}, {"type": "text", "text": text}],
                        },
                    ],
                    REFINE_TEMPLATE,
                    max_tokens=MAX_TOKENS,
                )
            )
        labels = self._ask(
            self.model,
            requests,
            [parse_refined(i.claim_type) for i in items],
            JSON_REMINDER,
            "new claims and an answer",
        )
        for item, label in zip(items, labels):
            now, judged = item.trace["rounds"][-1], item.rounds[-1]
            now["refine_raw"] = label.raw
            if not label.ok:
                now["refine_error"] = label.error
                item.held.append(item.answer or "")
                item.stopped = ERROR
                continue
            proposed, claims = label.label
            changed = judged.gated and proposed != item.answer
            now.update(
                proposed=proposed,
                changed=changed,
                new_claims=[c.as_json() for c in claims],
                answer_after=proposed if changed else item.answer,
            )
            if changed:
                item.answer = proposed
            item.held.append(item.answer or "")
            item.claims = claims
