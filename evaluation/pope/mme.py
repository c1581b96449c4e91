"""MME's score on its hallucination subtasks (Kestrel's MME-Hallucination, seed 000 Table 2),
computed as MME's evaluation tool computes it (``eval_tool/calculation.py`` in
BradyFU/Awesome-Multimodal-Large-Language-Models at 1c1d69e, ``tools/eval_tool.zip``).

- A reply is read by MME's ``parse_pred_ans``: lower-cased; exactly ``yes`` or ``no`` is that
  answer; else ``yes`` when its first four characters hold "yes", ``no`` when they hold "no",
  else ``other``, which is wrong whatever the label.
- Per subtask: accuracy, the share of questions answered right; accuracy+, the share of images
  whose two questions are both right; the subtask's score is 100 x accuracy + 100 x accuracy+
  (at most 200). The MME score is the sum over the subtasks scored (at most 800 over existence,
  count, position and color, Table 2's last column).

A question whose call failed for good counts as answered wrong (MME has no "failed"; the
failure policy of ``evaluation.failures`` decides whether such a run writes a table at all).
A Kestrel run is scored on its final answers and, beside them, on its initial answers (the
model's own answer before any refinement: the plain system's answer, as the POPE flow test
pins), with the difference, as Table 2 shows each method beside the baseline.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from mmcurate.core.markdown import markdown_table
from mmcurate.sources.mme import DATASET, HALLUCINATION

CLAIM_TYPES = {"existence": "existence", "count": "count", "position": "position", "color": "colour"}
OTHER = "other"


def read_reply(text: str) -> str:
    """MME's reading of a reply: yes, no or other (module docstring)."""
    reply = text.lower()
    if reply in ("yes", "no"):
        return reply
    prefix = reply[:4]
    return "yes" if "yes" in prefix else "no" if "no" in prefix else OTHER


def claim_type(probe: dict[str, Any]) -> str | None:
    """The Kestrel claim type an MME probe asks about (its subtask's), None for another probe."""
    return CLAIM_TYPES.get(probe["split"]) if probe.get("dataset") == DATASET else None


def is_mme(row: Mapping[str, Any]) -> bool:
    return row.get("dataset") == DATASET


def _score(rows: list[dict[str, Any]], answer: str) -> tuple[float, float, int, int]:
    """(accuracy, accuracy+, questions, images) of one subtask's rows, by their ``answer`` column."""
    right = [r.get(answer) is not None and r[answer].lower() == r["label"] for r in rows]
    by_image: dict[str, list[bool]] = defaultdict(list)
    for row, ok in zip(rows, right):
        by_image[row["image_file"]].append(ok)
    accuracy = sum(right) / len(rows)
    plus = sum(all(oks) for oks in by_image.values()) / len(by_image)
    return accuracy, plus, len(rows), len(by_image)


def mme_scores(rows: list[dict[str, Any]], answers: tuple[str, ...] = ("answer",)) -> list[dict[str, Any]]:
    """One row per MME subtask present (Table 2's order first), then the total ``MME score``:
    for each column of ``answers``, accuracy and accuracy+ in % and the score."""
    mme = [r for r in rows if is_mme(r)]
    subtasks = sorted(
        {r["split"] for r in mme},
        key=lambda s: (HALLUCINATION.index(s) if s in HALLUCINATION else len(HALLUCINATION), s),
    )
    out = []
    for subtask in subtasks:
        part = [r for r in mme if r["split"] == subtask]
        row: dict[str, Any] = {"subtask": subtask}
        for answer in answers:
            accuracy, plus, row["questions"], row["images"] = _score(part, answer)
            row.update(
                {
                    f"{answer}_accuracy": 100 * accuracy,
                    f"{answer}_accuracy_plus": 100 * plus,
                    f"{answer}_score": 100 * (accuracy + plus),
                }
            )
        out.append(row)
    if out:
        total: dict[str, Any] = {
            "subtask": "MME score",
            "questions": sum(r["questions"] for r in out),
            "images": sum(r["images"] for r in out),
        }
        for answer in answers:
            total.update(
                {
                    f"{answer}_accuracy": None,
                    f"{answer}_accuracy_plus": None,
                    f"{answer}_score": sum(r[f"{answer}_score"] for r in out),
                }
            )
        out.append(total)
    return out


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def mme_section(rows: list[dict[str, Any]], kestrel: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The MME scores of ``rows`` (``mme_scores``) and their markdown section; empty when the
    run holds no MME probe. A Kestrel run shows its initial answers' scores beside its final ones."""
    answers = ("initial", "answer") if kestrel else ("answer",)
    scores = mme_scores(rows, answers)
    if not scores:
        return [], []
    if kestrel:
        shown = [
            {
                "Subtask": r["subtask"],
                "Questions": str(r["questions"]),
                "Images": str(r["images"]),
                "Initial acc": _num(r["initial_accuracy"]),
                "Initial acc+": _num(r["initial_accuracy_plus"]),
                "Initial score": _num(r["initial_score"]),
                "Kestrel acc": _num(r["answer_accuracy"]),
                "Kestrel acc+": _num(r["answer_accuracy_plus"]),
                "Kestrel score": _num(r["answer_score"]),
                "Δ score": f"{r['answer_score'] - r['initial_score']:+.2f}",
            }
            for r in scores
        ]
    else:
        shown = [
            {
                "Subtask": r["subtask"],
                "Questions": str(r["questions"]),
                "Images": str(r["images"]),
                "Accuracy": _num(r["answer_accuracy"]),
                "Accuracy+": _num(r["answer_accuracy_plus"]),
                "Score": _num(r["answer_score"]),
            }
            for r in scores
        ]
    right = [k for k in shown[0] if k != "Subtask"]
    text = [
        "",
        "## MME-Hallucination (MME score)",
        "",
        markdown_table(shown, right=right),
        "",
        "Per subtask, score = accuracy + accuracy+ (both in %; accuracy+: images whose two questions are both "
        "right), at most 200; the MME score is their sum (MME's eval_tool/calculation.py). Replies read by MME's "
        "rule (exactly yes/no, else 'yes' or 'no' in the first four characters, else wrong)."
        + (" Initial: the model's answer before Kestrel's refinement (the plain answer)." if kestrel else ""),
    ]
    return scores, text
