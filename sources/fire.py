"""FIRE: ready-made student-teacher feedback dialogues about images (the dialogues ReflectV builds on).

What is published, and what this reader relies on:

- https://huggingface.co/datasets/PengxiangLi/FIRE holds ``FIRE-train-100K.json`` (224 MB),
  ``FIRE-test.json`` (20.1 MB) and ``FIRE-1M.json`` (1.91 GB), each ONE JSON array (the
  hub's file tree at commit 262359c; items are streamed with ``json_members.iter_items``).
  The per-view files ``FIRE-100K-Student.json``, ``FIRE-100K-Teacher.json``,
  ``FIRE-test-Student.json`` and ``FIRE-test-Teacher.json`` were deleted from the hub
  (its commit history, 13 June 2024).
- Two item layouts are read, told apart by the keys of the turns:

  1. ``from``/``value`` turns, as FIRE's own code reads them (github.com/MM-FIRE/FIRE,
     ``llava/eval/eval_feedback.py``, ``llava/eval/model_fire_chat_loader.py``): ``id``,
     ``image`` (relative to the image folder), ``conversations`` (``[{"from": "human" |
     "gpt", "value": ...}]``), ``raw.question.value``, ``raw.groundtruth.value`` and,
     where FIRE's generation loop recorded them, ``scores``. The first ``human`` turn is the
     question, every ``gpt`` turn a student answer, every later ``human`` turn the teacher's
     reply to the answer before it. In the student view that reply is the feedback alone:
     FIRE's chat loop puts ``get_feedback(reply)`` (the text after ``Feedback:``) into the
     student history (``llava/eval/feedback_chat.py``, ``Chat.invoke``), so it has no
     ``Score:`` line; a teacher reply kept whole starts with ``Score: N``.
  2. ``role``/``type`` turns, as the hub's rows are read through ``datasets.load_dataset(
     "PengxiangLi/FIRE")`` by github.com/Kkuntal990/vlm-self-reflection-ms-swift
     (``scripts/data_prep/prepare_fire_sharegpt.py``, ``prepare_fire_with_thought.py``):
     ``image``, ``source``, ``question`` (``{"value": ...}``) and ``conversations`` of
     ``{"role": "student" | "teacher", "type": "response" | "feedback", "value": ...}``,
     a teacher value reading ``Score: 6.`` / ``Feedback: ...`` when it carries a score
     (that reader strips the score when present and keeps the value whole otherwise).

  A student response there reads ``Thought: ...\nAnswer: ...`` (``prepare_fire_sharegpt.py``,
  ``extract_answer_from_response``: "Split by 'Answer:' and take everything after it";
  ``prepare_fire_with_thought.py`` keeps the whole "Thought+Answer"). Here the text after the
  first ``Answer:`` is the turn's ``answer`` and the text before it (without ``Thought:``) its
  ``thought``, kept beside it in ``meta.dialogue``; a response without ``Answer:`` is the answer
  whole.

  Not confirmed from the files themselves (they are not on this machine): which layout the
  current hub files hold and that every item has an ``id`` (an item without one is identified
  as ``<file stem>:<index in the file>``, stable as long as the published file is).

Ground truth: read from ``raw.groundtruth.value``, ``groundtruth.value`` or a string
``groundtruth`` where the item has one (``meta.truth_from: "groundtruth"``). The hub rows as the
only public reader of them reads them carry none (neither script reads a ground-truth field).
FIRE's teacher is given the ground-truth answer when it scores and comments on a response (the
FIRE paper, arXiv 2407.11522, section 3; not checkable against the files here), and a dialogue
ends once a response scores 10, so for such a row the
ground truth is the final answer the teacher's final turn accepts with ``Score: 10``
(``meta.truth_from: "accepted_final_answer"``). MIRROR's third filter (the final answer matches
the ground truth) then passes by construction for those rows, which ``meta.truth_from`` marks.
A row with neither is quarantined (no ground truth).

Scores, the rule and why: MIRROR keeps a dialogue only on the score s_t of every turn
(strictly ascending, final 10; seed 002, section 4.2) and FIRE's published dialogues need
not carry those scores. A turn's score is read from the teacher reply's first line
(``Score: N``: the integer after "Score:" on the first line, where FIRE's ``get_score``
looks; N in 0..10), else from the item's ``scores`` list (one per student answer). A dialogue with a
turn that has neither is *unscored*: it is ingested with ``score: null`` in
``meta.dialogue`` and ``meta.scores_from: "none"``, and the dialogue stage drops it with
reason ``unscored`` (a ledger row in the release's ``dialogues``): a score is never
guessed. A ``scores`` list of another length than the answers, or one that contradicts a
``Score:`` line, quarantines the item. A reply's feedback is the text after
``Feedback:``, or the whole reply when it has no such marker; the last answer may have no
reply (its feedback is empty). FIRE draws on 27 source sets; option ``domain`` tags them all
(default General QA). Images default to ``ROOT/images`` (FIRE's loaders join ``image`` to
their image root).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmcurate.core.domains import Domain
from mmcurate.core.records import Rejected, Sample

from .base import AdapterOptions, Located, SourceAdapter, text_field
from .image_qa import array_records, count_objects, guarded, image_qa_sample

IMAGE_TOKEN = "<image>"
_SCORE_LINE = re.compile(r"Score:\s*(\d+)")
FEEDBACK = "Feedback:"
THOUGHT, ANSWER = "Thought:", "Answer:"
PERFECT = 10
QUESTION, STUDENT, TEACHER = "question", "student", "teacher"
FROM_ROLES = {"gpt": STUDENT, "human": TEACHER}  # layout 1; the first human turn is the question
TYPES = {STUDENT: "response", TEACHER: "feedback"}  # layout 2


def teacher_reply(text: str) -> tuple[int | None, str]:
    """(score, feedback) of a FIRE teacher reply: the score of a first line holding "Score:"
    (None when it has none), the text after "Feedback:" (the whole reply without that
    marker). ValueError for a score outside 0..10."""
    lines = text.strip().splitlines()
    match = _SCORE_LINE.search(lines[0]) if lines else None
    score = int(match.group(1)) if match else None
    if score is not None and not 0 <= score <= PERFECT:
        raise ValueError(f"teacher reply scores {score}, outside 0..{PERFECT}: {text[:80]!r}")
    at = text.find(FEEDBACK)
    if at >= 0:
        return score, text[at + len(FEEDBACK) :].strip()
    return score, "\n".join(lines[1:]).strip() if match else text.strip()


def split_response(text: str) -> tuple[str | None, str]:
    """(thought, answer) of a student response: the text after the first ``Answer:`` is the
    answer and the text before it, without ``Thought:``, the thought; (None, text) without one."""
    at = text.find(ANSWER)
    if at < 0:
        return None, text.strip()
    thought = text[:at].strip()
    thought = thought[len(THOUGHT) :].strip() if thought.startswith(THOUGHT) else thought
    return thought or None, text[at + len(ANSWER) :].strip()


def _speakers(conversations: Any) -> list[tuple[str, str]]:
    """``(speaker, text)`` of every turn, speaker one of question, student, teacher."""
    if not isinstance(conversations, list) or not conversations:
        raise ValueError("conversations is not a non-empty list")
    if not all(isinstance(turn, dict) for turn in conversations):
        raise ValueError("a conversation turn is not an object")
    values = [turn.get("value") for turn in conversations]
    if any(not isinstance(v, str) or not v.strip() for v in values):
        raise ValueError("every conversation turn needs a non-empty value")
    if all("role" in turn for turn in conversations):
        speakers = [turn["role"] for turn in conversations]
        bad = [
            turn
            for turn in conversations
            if turn["role"] not in TYPES or turn.get("type", TYPES.get(turn["role"])) != TYPES.get(turn["role"])
        ]
        if bad:
            raise ValueError(
                f"turn {bad[0].get('role')!r}/{bad[0].get('type')!r} is neither a student response nor teacher feedback"
            )
        return list(zip(speakers, values))
    roles = [turn.get("from") for turn in conversations]
    if any(role not in FROM_ROLES for role in roles) or roles[0] != "human":
        raise ValueError("conversations must start with the human question and hold only human/gpt turns")
    return [(QUESTION, values[0])] + [(FROM_ROLES[r], v) for r, v in zip(roles[1:], values[1:])]


def dialogue_turns(conversations: Any, scores: Any = None) -> tuple[str | None, list[dict[str, Any]], str]:
    """(question or None, [{answer, score, feedback}], where the scores come from: ``reply``,
    ``scores``, ``none``) of a FIRE conversation (see the module docstring)."""
    speakers = _speakers(conversations)
    question = None
    if speakers[0][0] == QUESTION:
        question = speakers[0][1].replace(IMAGE_TOKEN, "").strip()
        speakers = speakers[1:]
    turns: list[dict[str, Any]] = []
    for position, (speaker, text) in enumerate(speakers):
        expected = STUDENT if position % 2 == 0 else TEACHER
        if speaker != expected:
            raise ValueError(
                f"conversations must alternate student answers and teacher replies (turn {position + 2} "
                f"is a {speaker} turn)"
            )
        if speaker == STUDENT:
            thought, answer = split_response(text)
            if not answer:
                raise ValueError(f"turn {position + 2}: the student response has nothing after {ANSWER!r}")
            turns.append({"answer": answer, "score": None, "feedback": "", **({"thought": thought} if thought else {})})
        else:
            turns[-1]["score"], turns[-1]["feedback"] = teacher_reply(text)
    if not turns:
        raise ValueError("conversations hold no student answer")
    return question, turns, _fill_scores(turns, scores)


def _fill_scores(turns: list[dict[str, Any]], scores: Any) -> str:
    """Complete the turns' scores from the item's ``scores`` list; say where they came from."""
    from_replies = all(t["score"] is not None for t in turns)
    if scores is None:
        return "reply" if from_replies else "none"
    if (
        not isinstance(scores, list)
        or len(scores) != len(turns)
        or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) and float(s).is_integer() and 0 <= s <= PERFECT
            for s in scores
        )
    ):
        raise ValueError(
            f"scores must list one score in 0..{PERFECT} per student answer ({len(turns)}), got {scores!r}"[:200]
        )
    for number, (turn, score) in enumerate(zip(turns, scores), start=1):
        if turn["score"] is not None and turn["score"] != int(score):
            raise ValueError(f"scores[{number - 1}] = {score} contradicts the reply's Score: {turn['score']}")
        turn["score"] = int(score)
    return "reply" if from_replies else "scores"


def _value(item: Any) -> str | None:
    """A FIRE text that is a turn-like ``{"value": ...}`` object or a plain string."""
    value = item.get("value") if isinstance(item, dict) else item
    return value.strip() if isinstance(value, str) and value.strip() else None


GIVEN, ACCEPTED = "groundtruth", "accepted_final_answer"  # where a ground truth came from


def ground_truth(record: dict[str, Any], turns: list[dict[str, Any]]) -> tuple[str, str]:
    """(ground truth, where it came from): the published field, else the final answer the
    teacher's final turn accepts with a perfect score (module docstring)."""
    raw = found if isinstance(found := record.get("raw"), dict) else {}
    truth = _value(raw.get("groundtruth")) or _value(record.get("groundtruth"))
    if truth is not None:
        return truth, GIVEN
    if turns[-1]["score"] == PERFECT:
        return turns[-1]["answer"], ACCEPTED
    raise ValueError(
        f"no ground truth (raw.groundtruth.value or groundtruth), and the teacher's final turn does "
        f"not accept the final answer (Score: {PERFECT})"
    )


class FIREOptions(AdapterOptions):
    files: list[str] | None = None  # JSON files under root; None: every *.json there
    domain: Domain = "General QA"


class FIRESource(SourceAdapter):
    name = "fire"
    Options = FIREOptions
    options: FIREOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files = self.listed_files(self.options.files, ["*.json"])
        self.image_dir = self.images or self.root / "images"

    def count_records(self) -> int:
        return sum(count_objects(array_records(path)) for path in self.files)

    def source_files(self) -> list[Path]:
        return list(self.files)

    def records(self) -> Iterator[Located | Rejected]:
        for path in self.files:
            for item in array_records(path):
                if isinstance(item, Rejected):
                    yield item
                else:
                    index = item[0].rsplit(":", 1)[1]
                    yield guarded(*item, self._sample, path.stem, index, item[1])

    def _sample(self, file: str, index: str, record: dict[str, Any]) -> Sample:
        ident = text_field(record, "id", numbers=True) if record.get("id") is not None else f"{file}:{index}"
        image = text_field(record, "image")
        asked, turns, scored = dialogue_turns(record.get("conversations"), record.get("scores"))
        truth, truth_from = ground_truth(record, turns)
        raw = found if isinstance(found := record.get("raw"), dict) else {}
        question = asked or _value(raw.get("question")) or _value(record.get("question"))
        question = question.replace(IMAGE_TOKEN, "").strip() if question else None
        if not question:
            raise ValueError("no question (a first human turn, raw.question.value or question.value)")
        meta = {"file": file, "dialogue": turns, "scores_from": scored, "truth_from": truth_from}
        if isinstance(record.get("source"), str):
            meta["fire_source"] = record["source"]
        return image_qa_sample(
            self.store, self.name, ident, question, [truth], self.image_dir, image, self.options.domain, meta
        )
