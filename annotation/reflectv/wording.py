"""How a reflection names its marks (seed paper 002, L685-707, Figure 11).

One instance is "a red point" (or "the red point"), several are "red points": the number
of marks drawn decides. The phrase joins the first-person reflection together with the
caption (the keyword, the tool call's anchor), so the ``<think>`` text names the anchor,
the colour and the mark type the tool call uses: the agreement the release validator checks.

Two ways to insert it (``reflectv.captions``, named in the manifest):

- a model (Figure 11: "insert the captions along with the marks into the feedbacks ... so the
  new information blends seamlessly ... do not show the ground truth"): it gets the
  reflection, the mark phrase and the caption, and replies with the reflection that now
  points at the marks. The reply is read strictly (``insertion_parser``): one plain
  paragraph in the first person that keeps at least half of the reflection's content words,
  names every content word of the caption, the colour and the mark type, carries no label
  or markup, and never states the ground truth more often than the reflection already did
  (the inserted text itself must not reveal it; the ledger records the check). One retry,
  then the turn has no usable reflection and the chain collapses to a QA pair.
  The paper inserts into the teacher's feedback and converts the result to the first person
  afterwards (Figures 11-12); here the rewrite comes first (the reflection stage) and the
  insertion goes into the first-person reflection, because how many marks there are (a /
  several) is known only once they are drawn.
- ``template``, the offline stand-in: one of a few fixed sentences appended to the
  reflection, chosen by the seed. It can never drop the mark or reveal the ground truth.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from mmcurate.core.text import content_tokens, normalize
from mmcurate.models.requests import ChatRequest

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


# ---------------------------------------------------------------------------- a model's insertion
TEMPLATE_NAME = "template-v1"
INSERT_TEMPLATE = "reflectv.caption.insert.v1"
INSERT_SYSTEM = (
    "You edit a short first-person reflection about an image. Marks have been drawn on the image to "
    "show something; you are told the marks (for example 'a green point' or 'green points') and a "
    "caption saying what they show. Work the caption and the marks into the reflection so that it "
    "reads naturally, keeping what it says, its first person and its flow, for example '..., as "
    "indicated by the green point in the image, ...'. Use the marks exactly as given (one mark: 'a' or "
    "'the'; several: the plural). Never state the answer to the question. Reply with the new "
    "reflection only."
)
# worked examples, sent as earlier turns (the paper's Figure 11 shows four variants of one)
INSERT_EXAMPLES = (
    (("I think the flower is not red. I should look at the petals again and think of another bright colour.",
      "a green point", "petals"),
     "I think the flower is not red. I should look at the petals again, highlighted by a green point in the "
     "image, and think of another bright colour."),
    (("My count was off. I need to count the bikes in 2018 once more.", "blue bounding boxes", "bikes in 2018"),
     "My count was off. I need to count the bikes in 2018 once more, marked by the blue bounding boxes in the image."),
)
INSERT_REMINDER = ("Your reply could not be used. Reply with the reflection only, in the first person, naming the "
                   "caption and the marks exactly as given, without stating the answer.")
MIN_KEPT_SHARE = 0.5  # an insertion keeps at least half of the reflection's content words
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|my|me|myself|we|our|us)\b")
_MARKUP = re.compile(r"[<>{}\[\]*`#|\\]")


def says(text: str, phrase: str) -> bool:
    """Whether ``text`` contains ``phrase`` as whole words (case and punctuation aside)."""
    wanted = normalize(phrase)
    return bool(wanted) and f" {wanted} " in f" {normalize(text)} "


def mentions(text: str, truths: list[str]) -> int:
    """How many times ``text`` states one of the ground-truth answers (as whole phrases)."""
    padded = f" {normalize(text)} "
    return sum(padded.count(f" {normalize(t)} ") for t in truths if normalize(t))


def insertion_messages(reflection: str, marks: str, caption: str) -> list[dict]:
    def ask(reflection: str, marks: str, caption: str) -> str:
        return f"Reflection: {reflection}\nMarks: {marks}\nCaption: {caption}"

    messages: list[dict] = [{"role": "system", "content": INSERT_SYSTEM}]
    for question, answer in INSERT_EXAMPLES:
        messages += [{"role": "user", "content": ask(*question)}, {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": ask(reflection, marks, caption)}]


def insertion_request(key: str, reflection: str, anchor: str, color: str, mark_type: str, count: int) -> ChatRequest:
    return ChatRequest(key, insertion_messages(reflection, mark_phrase(color, mark_type, count), anchor), INSERT_TEMPLATE)


def insertion_parser(reflection: str, anchor: str, color: str, mark_type: str,
                     truths: list[str]) -> Callable[[str], str | None]:
    """Read a model's insertion (see the module docstring); None when it is unusable."""
    kept = content_tokens(reflection)

    def parse(text: str) -> str | None:
        reply = " ".join(text.split()).strip("\"'").strip()
        if not reply or _MARKUP.search(reply) or re.search(r"\b(score|feedback|caption|marks)\s*:", reply, re.I):
            return None
        if _FIRST_PERSON.search(reply) is None or len(reply) > 3 * len(reflection) + 200:
            return None
        words = content_tokens(reply)
        if not content_tokens(anchor) <= words or (kept and len(kept & words) < MIN_KEPT_SHARE * len(kept)):
            return None
        if not says(reply, color) or not any(says(reply, noun) for noun in NOUNS[mark_type]):
            return None
        if mentions(reply, truths) > mentions(reflection, truths):
            return None  # the inserted text states the answer
        return reply

    return parse
