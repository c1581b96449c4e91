"""ReflectV stage 5 (seed paper 002, section 4.5): do the marks show what the reflection names?

A vision model (the paper: Qwen2.5-VL-7B) sees each marked image with the question, the
reflection and the anchor, and answers yes or no (``models.labels``: first-token logprobs
when given, else the strict one-word parse with one retry). Every reflective turn must get
a yes for the sample to stay a multi-turn chain; a no is an inconsistent visualisation and
an unreadable reply is undetermined: either way the sample will be a QA pair
(``chain_issue``), with the verdict of every turn in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.models.labels import ask_labels, first_token_label, label_request
from mmcurate.models.requests import ChatRequest

from .chains import eligible, issues_of, require_chains, turns_of, with_chains
from .wording import NOUNS

STAGE = "visual"
CHECK_TURN = "visual.marks.v1"
CHECK_SAMPLE = "visual.sample.v1"
TEMPLATE = "reflectv.visual.v1"
SYSTEM = (
    "You check marks drawn on an image. You are given a question about the image, a reflection "
    "that points at a region, and the marks meant to show that region. Answer yes when the marks "
    "sit on what the reflection names, no when they mark something else or nothing. Reply with "
    "exactly one word: yes or no."
)
REMINDER = "Your reply could not be read. Reply with exactly one word: yes or no."
YES_NO = ("yes", "no")


def verify_prompt(question: str, think: str, anchor: str, color: str, mark_type: str, marks: int) -> str:
    noun = NOUNS[mark_type][0 if marks == 1 else 1]
    return (
        f"Question: {question}\nReflection: {think}\nThe {color} {noun} should show: {anchor}\n"
        "Do the marks show it? Reply with exactly one word: yes or no."
    )


def verify_request(key: str, question: str, turn: dict) -> ChatRequest:
    """Ask the verifier whether a marked turn's marks show what its reflection names."""
    prompt = verify_prompt(question, turn["think"], turn["keyword"], turn["color"], turn["mark_type"], turn["marks"])
    return label_request(
        key, SYSTEM, [{"type": "image", "sha256": turn["marked_image"]}, {"type": "text", "text": prompt}], TEMPLATE
    )


@dataclass
class VisualCheck(Stage):
    """Keep a chain only when the verifier says yes to every marked turn."""

    verifier: str
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        require_chains(samples, STAGE)
        if not ctx.pool.settings.model(self.verifier).vision:
            raise MmcurateError(f"visual verifier {self.verifier!r} cannot see images (vision: false)")
        rows, all_turns, issues = samples.to_pylist(), turns_of(samples), issues_of(samples)
        places = [
            (i, n)
            for i, (turns, issue) in enumerate(zip(all_turns, issues))
            if eligible(turns, issue)
            for n in range(len(turns) - 1)
        ]
        requests = []
        for i, n in places:
            turn = all_turns[i][n]
            requests.append(verify_request(f"{rows[i]['sample_id']}/t{n + 1}", rows[i]["question"], turn))
        try:
            labels = (
                ask_labels(
                    ctx.pool.client(self.verifier),
                    requests,
                    YES_NO,
                    REMINDER,
                    STAGE,
                    lambda response: first_token_label(response, YES_NO),
                )
                if requests
                else []
            )
        finally:
            ctx.pool.release(self.verifier)
        decisions: list[Decision] = []
        for (i, n), label in zip(places, labels):
            sid, turn = rows[i]["sample_id"], all_turns[i][n]
            turn["verified"] = label.label == "yes" if label.ok else None
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_TURN,
                    label.label if label.ok else "error",
                    model=self.verifier,
                    context_id=f"t{n + 1}",
                    detail={
                        "raw": label.raw,
                        "anchor": turn["keyword"],
                        **({"error": label.error} if label.error else {}),
                    },
                )
            )
            if issues[i] is None and not turn["verified"]:
                issues[i] = (
                    f"visual: the marks do not show {turn['keyword']!r} (turn {n + 1})"
                    if label.ok
                    else f"visual: undetermined (turn {n + 1})"
                )
        checked = sorted({i for i, _ in places})
        for i in checked:
            decisions.append(
                Decision(
                    rows[i]["sample_id"],
                    STAGE,
                    CHECK_SAMPLE,
                    "verified" if issues[i] is None else "collapse",
                    model=self.verifier,
                    detail={"reason": issues[i] or "every mark confirmed"},
                )
            )
        counts = {
            "input": len(rows),
            "checked": len(checked),
            "verified": sum(issues[i] is None for i in checked),
            "turns": len(places),
            "errors": sum(not label.ok for label in labels),
        }
        return StageResult(
            stage=STAGE,
            kept=with_chains(samples, all_turns, issues),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            components={"visual_verifier": self.verifier},
        )
