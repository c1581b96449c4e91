"""How a reflection names its marks (seed paper 002, L685-707, Figure 11).

One instance is "a red point" (or "the red point"), several are "red points": the number
of marks drawn decides. The phrase joins the first-person reflection together with the
keyword (the tool call's anchor), so the ``<think>`` text always names the anchor, the
colour and the mark type the tool call uses: the agreement the release validator checks.
The insertion is a template, not a model (the paper asks an LLM to blend it in): a fixed
sentence can never drop the mark or reveal the ground truth, and a seeded choice among
a few sentence shapes keeps the wording varied.
"""
from __future__ import annotations

import hashlib

# mark type -> (singular, plural) as a reflection says it
NOUNS = {
    "point": ("point", "points"),
    "bbox": ("bounding box", "bounding boxes"),
    "circle": ("circle", "circles"),
    "arrow": ("arrow", "arrows"),
    "line": ("line", "lines"),
    "ellipse": ("ellipse", "ellipses"),
    "mask": ("mask", "masks"),
}
SENTENCES = (
    "I should look again at the {anchor}, as indicated by {marks} in the image.",
    "Checking the {anchor}, marked by {marks} in the image, should settle this.",
    "The {anchor}, highlighted by {marks} in the image, deserves a closer look.",
    "Looking closer at the {anchor}, shown with {marks} in the image, may change my answer.",
)


def mark_phrase(color: str, mark_type: str, count: int, definite: bool = False) -> str:
    """"a red point" / "the red point" for one mark ("an orange point"), "red points" / "the red
    points" for several."""
    if count < 1:
        raise ValueError(f"a mark phrase needs at least one mark, got {count}")
    singular, plural = NOUNS[mark_type]
    if count == 1:
        article = "the" if definite else "an" if color[0] in "aeiou" else "a"
        return f"{article} {color} {singular}"
    return f"{'the ' if definite else ''}{color} {plural}"


def seeded_index(seed: int, *parts: str, modulo: int) -> int:
    """A stable choice in ``range(modulo)`` from the seed and the parts (sample id, turn, ...)."""
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % modulo


def grounded_reflection(reflection: str, anchor: str, color: str, mark_type: str, count: int, variant: int) -> str:
    """The first-person reflection followed by the sentence that points at the marks."""
    sentence = SENTENCES[variant % len(SENTENCES)]
    marks = mark_phrase(color, mark_type, count, definite=variant % 2 == 1)
    return f"{reflection.strip()} {sentence.format(anchor=anchor, marks=marks)}"
