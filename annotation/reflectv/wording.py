"""How a reflection names its marks (seed paper 002, L685-707, Figure 11).

One instance is "a red point" (or "the red point"), several are "red points": the number
of marks drawn decides. The phrase goes into the turn's text together with the caption (the
keyword, the tool call's anchor), so the ``<think>`` text names the anchor, the colour and
the mark type the tool call uses: the agreement the release validator checks.

Which text it goes into (``reflectv.caption_order``):

- ``before_rewrite`` (the default, the paper's order, Figures 11 then 12): the teacher's
  feedback, in the teacher's voice ("Take a closer look at the petals, as indicated by the
  green point in the image"); the rewriter then turns the result into the first person
  (``reflection.rewrite_parser`` with ``keeps``: the rewrite must still name the caption, the
  colour and the mark). The marks are drawn first, so "a" or several is known.
- ``after_rewrite`` (the order before): the first-person reflection the reflection stage wrote.

Two ways to insert it (``reflectv.captions``, named in the manifest):

- a model (Figure 11: "insert the captions along with the marks into the feedbacks ... so the
  new information blends seamlessly ... do not show the ground truth"): it gets the text,
  the mark phrase and the caption, and replies with the text that now points at the marks.
  The reply is read strictly (``insertion_parser``): one plain paragraph (in the first person
  when the text is a reflection) that keeps at least half of the text's content words, names
  every content word of the caption, the colour and the mark type, carries no label or
  markup, and never states the ground truth, even where the text did (Figure 11's "DO NOT
  show the <groundtruth>"; the ledger records the check). One retry, then the turn has no
  usable text and the chain collapses to a QA pair.
- ``template``, the offline stand-in: one of a few fixed sentences appended to the text,
  chosen by the seed (in the teacher's voice before the rewrite, in the first person after
  it). It never drops the mark and adds nothing of the ground truth (the caption never holds
  it); it cannot take out an answer the text states, which the validator then refuses.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from mmcurate.core.text import answer_offsets, content_tokens, find_answer
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
SENTENCES = (  # appended to a first-person reflection (after_rewrite)
    "I should look again at the {anchor}, as indicated by {marks} in the image.",
    "Checking the {anchor}, marked by {marks} in the image, should settle this.",
    "The {anchor}, highlighted by {marks} in the image, deserves a closer look.",
    "Looking closer at the {anchor}, shown with {marks} in the image, may change my answer.",
)
FEEDBACK_SENTENCES = (  # appended to the teacher's feedback (before_rewrite; Figure 11's examples)
    "Take a closer look at the {anchor}, as indicated by {marks} in the image.",
    "Check the {anchor} closely, the area highlighted by {marks} in the image.",
    "Inspect the {anchor}, noted by {marks} in the image.",
    "Look again at the {anchor}, marked by {marks} in the image.",
)


def mark_phrase(color: str, mark_type: str, count: int, definite: bool = False) -> str:
    """ "a red point" / "the red point" for one mark ("an orange point"), "red points" / "the red
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


def grounded_reflection(
    reflection: str, anchor: str, color: str, mark_type: str, count: int, variant: int, first_person: bool = True
) -> str:
    """The text (a first-person reflection, or else the teacher's feedback) followed by the
    sentence that points at the marks."""
    sentences = SENTENCES if first_person else FEEDBACK_SENTENCES
    sentence = sentences[variant % len(sentences)]
    marks = mark_phrase(color, mark_type, count, definite=variant % 2 == 1)
    return f"{reflection.strip()} {sentence.format(anchor=anchor, marks=marks)}"


def names_marks(text: str, anchor: str, color: str, mark_type: str) -> bool:
    """Whether ``text`` names every content word of the anchor, the colour and the mark type
    (singular or plural): what the validator asks of a turn's ``<think>``."""
    return (
        content_tokens(anchor) <= content_tokens(text)
        and says(text, color)
        and any(says(text, noun) for noun in NOUNS[mark_type])
    )


# ---------------------------------------------------------------------------- a model's insertion
TEMPLATE_NAME = "template-v1"
INSERT_TEMPLATE = "reflectv.caption.insert.v1"
INSERT_FEEDBACK_TEMPLATE = "reflectv.caption.insert-feedback.v1"
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
    (
        (
            "I think the flower is not red. I should look at the petals again and think of another bright colour.",
            "a green point",
            "petals",
        ),
        "I think the flower is not red. I should look at the petals again, highlighted by a green point in the "
        "image, and think of another bright colour.",
    ),
    (
        ("My count was off. I need to count the bikes in 2018 once more.", "blue bounding boxes", "bikes in 2018"),
        "My count was off. I need to count the bikes in 2018 once more, marked by the blue bounding boxes in the image.",
    ),
)
INSERT_FEEDBACK_SYSTEM = (
    "You are given a teacher's feedback on a student's answer about an image, marks drawn on the image "
    "(for example 'a green point' or 'green points') and a caption saying what they show. Insert the "
    "caption along with the marks into the feedback so that the new information blends seamlessly with "
    "the original content, keeping its flow, for example '..., as indicated by the green point in the "
    "image, ...'. Use the marks exactly as given (one mark: 'a' or 'the'; several: the plural). Do not "
    "show the answer. Reply with the new feedback only."
)
# Figure 11's own example, and one of several marks
INSERT_FEEDBACK_EXAMPLES = (
    (
        (
            "Your observation that the flower is vibrant is partly right. However, the flower is not red. Take a "
            "closer look at the petals and think if there is another bright color that more accurately describes it.",
            "a green point",
            "petals",
        ),
        "Your observation that the flower is vibrant is partly right. However, the flower is not red. Take a "
        "closer look at the petals, as indicated by the green point in the image, and think if there is another "
        "bright color that more accurately describes it.",
    ),
    (
        ("Your count is off. Count the bikes in 2018 once more.", "blue bounding boxes", "bikes in 2018"),
        "Your count is off. Count the bikes in 2018 once more, marked by the blue bounding boxes in the image.",
    ),
)
INSERT_REMINDER = (
    "Your reply could not be used. Reply with the reflection only, in the first person, naming the "
    "caption and the marks exactly as given, without stating the answer."
)
INSERT_FEEDBACK_REMINDER = (
    "Your reply could not be used. Reply with the feedback only, naming the caption and the "
    "marks exactly as given, without stating the answer."
)
MIN_KEPT_SHARE = 0.5  # an insertion keeps at least half of the reflection's content words
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|my|me|myself|we|our|us)\b")
_MARKUP = re.compile(r"[<>{}\[\]*`#|\\]")


def says(text: str, phrase: str) -> bool:
    """Whether ``text`` contains ``phrase`` as whole words (``core.text.find_answer``'s rule)."""
    return find_answer(text, [phrase]) >= 0


def mentions(text: str, truths: list[str]) -> int:
    """How many times ``text`` states one of the ground-truth answers (``core.text.answer_offsets``)."""
    return len(answer_offsets(text, truths))


def insertion_messages(text: str, marks: str, caption: str, first_person: bool = True) -> list[dict]:
    """Figure 11's request: ``text`` is a first-person reflection, or else the teacher's feedback."""
    label = "Reflection" if first_person else "Feedback"

    def ask(text: str, marks: str, caption: str) -> str:
        return f"{label}: {text}\nMarks: {marks}\nCaption: {caption}"

    system, examples = (
        (INSERT_SYSTEM, INSERT_EXAMPLES) if first_person else (INSERT_FEEDBACK_SYSTEM, INSERT_FEEDBACK_EXAMPLES)
    )
    messages: list[dict] = [{"role": "system", "content": system}]
    for question, answer in examples:
        messages += [{"role": "user", "content": ask(*question)}, {"role": "assistant", "content": answer}]
    return [*messages, {"role": "user", "content": ask(text, marks, caption)}]


def insertion_request(
    key: str, text: str, anchor: str, color: str, mark_type: str, count: int, first_person: bool = True
) -> ChatRequest:
    return ChatRequest(
        key,
        insertion_messages(text, mark_phrase(color, mark_type, count), anchor, first_person),
        INSERT_TEMPLATE if first_person else INSERT_FEEDBACK_TEMPLATE,
    )


def insertion_parser(
    text: str, anchor: str, color: str, mark_type: str, truths: list[str], first_person: bool = True
) -> Callable[[str], str | None]:
    """Read a model's insertion into ``text`` (see the module docstring); None when it is unusable."""
    kept = content_tokens(text)

    def parse(raw: str) -> str | None:
        reply = " ".join(raw.split()).strip("\"'").strip()
        if not reply or _MARKUP.search(reply) or re.search(r"\b(score|feedback|caption|marks)\s*:", reply, re.I):
            return None
        if (first_person and _FIRST_PERSON.search(reply) is None) or len(reply) > 3 * len(text) + 200:
            return None
        if kept and len(kept & content_tokens(reply)) < MIN_KEPT_SHARE * len(kept):
            return None
        if not names_marks(reply, anchor, color, mark_type):
            return None
        if mentions(reply, truths):
            return None  # Figure 11: "DO NOT show the <groundtruth>", even where the feedback did
        return reply

    return parse
