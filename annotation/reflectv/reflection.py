"""ReflectV stage 3 (seed paper 002, sections 4.3-4.4): grounding keywords and first-person reflections.

For every reflective turn (every turn of a multi-turn dialogue but the last):

- Keyword, the tool call's anchor. General QA: the objects the teacher's feedback names,
  merged into a short caption (the paper's two prompts of Figure 10). Scene text, Document
  and Chart (``core.domains.DENSE_PERCEPTION``: TextVQA, OCR-VQA, DocVQA, ChartQA, DVQA),
  where "reflection lacks spatial specificity" (002 section 4.3): the subject-plus-modifier
  phrase of the question (Figure 9's prompt: "What's the maximum value in the green line?"
  becomes "maximum value in the green line"); the place of its marks comes from the ground
  truth (the grounding stage, ``grounding.locate_phrase``), the words never do: Figure 11
  forbids the rewritten feedback to show the ground truth. A keyword never contains the
  ground truth (a keyword that does is unusable and the chain collapses to a QA pair), a
  question word or markup. ``keywords: heuristic`` is the offline stand-in: the feedback's
  content words minus the student's answer and words about looking (General QA), or the
  question minus question words, auxiliaries and the ground truth's words (the others).
- Reflection: teacher feedback rewritten by the rewriter model in the first person
  (Figure 12). The paper inserts the caption and marks into the teacher's feedback first
  (Figure 11) and rewrites that (``reflectv.caption_order: before_rewrite``, the default): the
  rewrite then runs in the grounding stage, once the marks are drawn, and must keep the
  caption, the colour and the mark. With ``after_rewrite`` (the order before) this stage
  rewrites the bare feedback and the grounding stage inserts into the rewrite. The score and
  the "Feedback:" label were split off when the teacher's reply was read; the rewriter is
  shown three worked examples, and its reply is rejected when it still carries those labels,
  has no first-person word, talks about the rewriting, keeps less than half of the text's
  content words, contains markup, or states the ground truth (Figure 11: "DO NOT show the
  <groundtruth>"; a turn before the last never states it, ``turns.turn_defects``).

Model replies are read strictly with one retry (``models.labels.ask_parsed``). A turn whose keyword
or reflection stays unreadable ends the sample's way to a multi-turn chain (``chain_issue``):
it will be a QA pair.

Feedback that already states the answer (``reflection.leak.v1``, recorded either way): the
teacher sees the ground truth, and Figure 11 has the caption insertion leave it out ("DO NOT
show the <groundtruth>"), so by default such a chain goes on (``keep``) and its insertion and
rewrite must drop the answer (a turn that still states it fails the validator and the chain
becomes a QA pair); with ``reflectv.collapse_revealing_feedback: true`` it collapses to a QA
pair at once (``collapse``). Keywords never state the answer in either reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.core.domains import DENSE_PERCEPTION, GENERAL_QA, domain_of
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.specs import Heuristic, LabellerSpec, coerce
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.text import STOPWORDS, content_tokens, find_answer
from mmcurate.models.labels import ask_parsed
from mmcurate.models.requests import ChatRequest

from .chains import eligible, issues_of, require_chains, turns_of, with_chains
from .wording import names_marks

STAGE = "reflection"
CHECK_KEYWORD = "reflection.keyword.v1"
CHECK_REWRITE = "reflection.rewrite.v1"
CHECK_SAMPLE = "reflection.sample.v1"
CHECK_LEAK = "reflection.leak.v1"
MAX_KEYWORD_WORDS = 10
HEURISTIC_WORDS = 5
OBJECTS_TEMPLATE = "reflectv.keywords.objects.v1"
CAPTION_TEMPLATE = "reflectv.keywords.caption.v1"
SUBJECT_TEMPLATE = "reflectv.keywords.subject.v1"
REWRITE_TEMPLATE = "reflectv.rewrite.v1"
CAPTION_ORDERS = ("before_rewrite", "after_rewrite")  # reflectv.caption_order; the first is the paper's

OBJECTS_SYSTEM = (
    "You read a question about an image, a student's answer and a teacher's feedback on it. "
    "List the physical objects the FEEDBACK mentions that could be located in the image, as a "
    "few short noun phrases taken from the feedback. Reply with the objects only, separated by "
    "'|', for example: grey cats|a white spotted leopard"
)
CAPTION_SYSTEM = (
    "You combine a list of objects written as object1|object2|... into one short caption of "
    "at most 10 words, for example: 'left glass|yellow liquid' becomes 'yellow liquid in left "
    "glass'. Reply with the caption only."
)
SUBJECT_SYSTEM = (
    "You write a short phrase naming where in a chart, document or scene text the answer to a "
    "question is found: the subject of the question with its key modifiers (total, average, "
    "maximum, a year, a category, ...), for example 'How many bikes are there in 2018?' becomes "
    "'bikes in 2018'. Never use question words (what, how many, ...), never state the answer "
    "itself. Reply with the phrase only."
)
REWRITE_SYSTEM = (
    "Rewrite the teacher's comment as the student's own thought, in the first person (I, my). "
    "Keep every hint about where to look, drop labels such as 'Score: 3' or 'Feedback:', and do "
    "not add the correct answer. Reply with one or two sentences only."
)
# worked examples, sent as earlier turns of the conversation (a small model follows them far
# better than instructions alone)
REWRITE_EXAMPLES = (
    (
        "Your answer is wrong. Check the blue bars again.",
        "Wait, I think my answer is wrong. I should check the blue bars again.",
    ),
    (
        "The man is not holding a phone. Look at the object in his left hand.",
        "Hmm, I don't think the man is holding a phone. I need to look at the object in his left hand.",
    ),
    (
        "Partly right, but the title has more words. Read the whole title.",
        "I was partly right, but I missed some words of the title. I should read the whole title.",
    ),
)
MIN_HINT_SHARE = 0.5  # a rewrite keeps at least half of the feedback's content words
META_WORDS = re.compile(r"\b(rewrit\w*|sentence|here's|here is|original)\b", re.IGNORECASE)
KEYWORD_REMINDER = "Your reply could not be used. Reply with the phrase only, on one line, without the answer."
OBJECTS_REMINDER = "Your reply could not be used. Reply with the objects only, separated by '|', on one line."
REWRITE_REMINDER = (
    "Your reply could not be used. Reply with the rewritten text only, in the first person "
    "(I, my), without labels and without stating the correct answer."
)

QUESTION_WORDS = frozenset("what which who whom whose when where why how many much".split())
AUXILIARIES = frozenset(
    "is are was were be been do does did has have had can could would will shall should there s".split()
)
LOOKING = frozenset(
    """look looking closer again carefully check consider notice see think read count compare
    answer answers image picture photo correct incorrect right wrong partly try once further off more many
    close almost still first whole line kind different""".split()
)
FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|my|me|myself|we|our|us)\b")
_MARKUP = re.compile(r"[<>{}\[\]*`#|\\]")
_WORD = re.compile(r"[A-Za-z0-9][\w'$,.-]*[\w$]|[A-Za-z0-9]")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _answer_words(truths: list[str]) -> set[str]:
    return {w for t in truths for w in content_tokens(t)}


def feedback_keyword(feedback: str, answer: str, truths: list[str]) -> str | None:
    """Heuristic General QA keyword: the feedback's first content words, without the
    student's answer, words about looking, or the ground truth."""
    drop = content_tokens(answer) | _answer_words(truths)
    kept: list[str] = []
    for word in _words(feedback):
        lower = word.lower()
        if lower in STOPWORDS or lower in LOOKING or lower in kept or (content_tokens(word) & drop):
            continue
        kept.append(lower)
    return " ".join(kept[:HEURISTIC_WORDS]) or None


def question_keyword(question: str, truths: list[str]) -> str | None:
    """Heuristic keyword for scene text, documents and charts: the question without question
    words, auxiliaries and articles (Figure 9's examples), and without the words of ``truths``."""
    drop = _answer_words(truths)
    articles = {"a", "an", "the"}  # "A" inside a question is a name ("Company A"), not an article
    kept = [
        w
        for i, w in enumerate(_words(question))
        if w.lower() not in QUESTION_WORDS | AUXILIARIES
        and w not in articles
        and not (i == 0 and w.lower() in articles)
        and not (content_tokens(w) & drop)
    ]
    while kept and kept[0].lower() in STOPWORDS:
        kept.pop(0)
    return " ".join(kept[:MAX_KEYWORD_WORDS]) or None


def _one_line(text: str) -> str | None:
    line = text.strip().strip("\"'").strip()
    if not line or "\n" in line or _MARKUP.search(line):
        return None
    return line.rstrip(".").strip() or None


def keyword_parser(truths: list[str], min_words: int = 1) -> Callable[[str], str | None]:
    """Read a keyword reply: one plain line of ``min_words``..10 words, no question word, none
    of ``truths``."""

    def parse(text: str) -> str | None:
        line = _one_line(text)
        if line is None or not min_words <= len(line.split()) <= MAX_KEYWORD_WORDS or find_answer(line, truths) >= 0:
            return None
        if line.split()[0].lower() in QUESTION_WORDS:
            return None
        return line

    return parse


def objects_parser(truths: list[str]) -> Callable[[str], list[str] | None]:
    """Read ``object1|object2|...``: one line, 1-8 objects of at most 6 words, no label, no answer."""

    def parse(text: str) -> list[str] | None:
        line = text.strip().strip("\"'").strip().rstrip(".")
        if not line or "\n" in line:
            return None
        objects = [o.strip() for o in line.split("|")]
        if not 1 <= len(objects) <= 8 or any(
            not o or len(o.split()) > 6 or ":" in o or _MARKUP.search(o) for o in objects
        ):
            return None
        return None if any(find_answer(o, truths) >= 0 for o in objects) else objects

    return parse


def objects_request(key: str, question: str, answer: str, feedback: str) -> ChatRequest:
    """General QA, first step: the entities the feedback names, as ``object1|object2``."""
    return ChatRequest(
        key,
        [
            {"role": "system", "content": OBJECTS_SYSTEM},
            {"role": "user", "content": f"Question: {question}\nAnswer: {answer}\nFeedback: {feedback}"},
        ],
        OBJECTS_TEMPLATE,
    )


def caption_request(key: str, objects: list[str]) -> ChatRequest:
    """General QA, second step: the entities merged into one short caption."""
    return ChatRequest(
        key,
        [{"role": "system", "content": CAPTION_SYSTEM}, {"role": "user", "content": "|".join(objects)}],
        CAPTION_TEMPLATE,
    )


def subject_request(key: str, question: str, truths: list[str]) -> ChatRequest:
    """Scene text, documents, charts: the subject phrase of the question (Figure 9), which must
    not state the ground truth."""
    return ChatRequest(
        key,
        [
            {"role": "system", "content": SUBJECT_SYSTEM},
            {"role": "user", "content": f"Question: {question}\nAnswer (do not repeat it): {' | '.join(truths)}"},
        ],
        SUBJECT_TEMPLATE,
    )


def rewrite_request(key: str, feedback: str) -> ChatRequest:
    return ChatRequest(key, rewrite_messages(feedback), REWRITE_TEMPLATE)


def rewrite_messages(feedback: str) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": REWRITE_SYSTEM}]
    for comment, rewrite in REWRITE_EXAMPLES:
        messages += [{"role": "user", "content": comment}, {"role": "assistant", "content": rewrite}]
    return [*messages, {"role": "user", "content": feedback}]


def rewrite_parser(
    feedback: str, truths: list[str], keeps: tuple[str, str, str] | None = None
) -> Callable[[str], str | None]:
    """Read a first-person rewrite of ``feedback`` (see the module docstring); ``keeps``: the
    (caption, colour, mark type) inserted into it, which the rewrite must still name."""
    hints = content_tokens(feedback)

    def parse(text: str) -> str | None:
        rewrite = " ".join(text.split()).strip("\"'").strip()
        if not rewrite or re.search(r"\b(score|feedback)\s*:", rewrite, re.IGNORECASE) or _MARKUP.search(rewrite):
            return None
        if (
            FIRST_PERSON.search(rewrite) is None
            or META_WORDS.search(rewrite)
            or len(rewrite) > max(400, 3 * len(feedback))
        ):
            return None
        if hints and len(hints & content_tokens(rewrite)) < MIN_HINT_SHARE * len(hints):
            return None
        if find_answer(rewrite, truths) >= 0:
            return None
        if keeps is not None and not names_marks(rewrite, *keeps):
            return None
        return rewrite

    return parse


def _unread(raw: list | None) -> str:
    """The verdict of a turn left without a keyword or reflection: ``error`` when its model
    call failed for good (the run is incomplete; a rerun resumes it), ``unusable`` when the
    model replied and the reply stayed unusable after its retry (the chain collapses to a QA
    pair, as the validator would make it; a rerun repeats the cached reply)."""
    return "error" if raw and raw[-1] is None else "unusable"


@dataclass
class _Turn:
    """One reflective turn waiting for its keyword and reflection."""

    row: dict[str, Any]
    index: int
    turn: dict[str, Any]
    domain: str

    @property
    def key(self) -> str:
        return f"{self.row['sample_id']}/t{self.index + 1}"


@dataclass
class WriteReflections(Stage):
    """Keywords and first-person reflections for every reflective turn (module docstring)."""

    keywords: LabellerSpec
    rewriter: str
    collapse_revealing: bool = False  # collapse a chain whose feedback states the answer (module docstring)
    caption_order: str = CAPTION_ORDERS[0]  # before_rewrite: the grounding stage rewrites, after the caption
    name = STAGE

    def __post_init__(self) -> None:
        self.keywords = coerce(LabellerSpec, self.keywords)
        if self.caption_order not in CAPTION_ORDERS:
            raise ValueError(f"caption_order must be one of {CAPTION_ORDERS}, got {self.caption_order!r}")

    @property
    def _complete(self) -> str:
        return (
            "every reflective turn has a keyword and a reflection"
            if self.caption_order == "after_rewrite"
            else "every reflective turn has a keyword"
        )

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        require_chains(samples, STAGE)
        rows, all_turns, issues = samples.to_pylist(), turns_of(samples), issues_of(samples)
        decisions: list[Decision] = []
        pending: list[_Turn] = []
        for i, (row, turns) in enumerate(zip(rows, all_turns)):
            if not eligible(turns, issues[i]):
                continue
            try:
                domain = domain_of(row["meta"])
            except ValueError as exc:
                raise MmcurateError(f"sample {row['sample_id']}: {exc}") from None
            leaked = [n + 1 for n, t in enumerate(turns[:-1]) if find_answer(t["feedback"], row["answers"]) >= 0]
            if leaked:
                decisions.append(
                    Decision(
                        row["sample_id"],
                        STAGE,
                        CHECK_LEAK,
                        "collapse" if self.collapse_revealing else "keep",
                        detail={"turns": leaked, "collapse_revealing_feedback": self.collapse_revealing},
                    )
                )
                if self.collapse_revealing:
                    issues[i] = f"reflection: the teacher's feedback gives the answer away (turn {leaked[0]})"
                    continue
            pending += [_Turn(row, n, t, domain) for n, t in enumerate(turns[:-1])]
        keywords = self._keywords(ctx, pending)
        failed: dict[str, str] = {}
        for item, (keyword, detail) in zip(pending, keywords):
            item.turn["keyword"] = keyword
            verdict = "ok" if keyword else _unread(detail.get("raw") or detail.get("objects_raw"))
            decisions.append(
                Decision(
                    item.row["sample_id"],
                    STAGE,
                    CHECK_KEYWORD,
                    verdict,
                    model=str(self.keywords),
                    context_id=f"t{item.index + 1}",
                    detail=detail,
                )
            )
            if keyword is None:
                failed.setdefault(item.row["sample_id"], f"reflection: no usable keyword (turn {item.index + 1})")
        to_rewrite = [
            item for item in pending if item.row["sample_id"] not in failed and self.caption_order == "after_rewrite"
        ]
        for item, parsed in zip(to_rewrite, self._rewrites(ctx, to_rewrite)):
            item.turn["reflection"] = parsed.label
            detail = {
                "reflection": parsed.label,
                "raw": parsed.raw,
                **({"error": parsed.error} if parsed.error else {}),
            }
            decisions.append(
                Decision(
                    item.row["sample_id"],
                    STAGE,
                    CHECK_REWRITE,
                    "ok" if parsed.ok else _unread(parsed.raw),
                    model=self.rewriter,
                    context_id=f"t{item.index + 1}",
                    detail=detail,
                )
            )
            if not parsed.ok:
                failed.setdefault(item.row["sample_id"], f"reflection: rewrite unusable (turn {item.index + 1})")
        for i, row in enumerate(rows):
            issues[i] = issues[i] or failed.get(row["sample_id"])
        chains = 0
        for row, turns, issue in zip(rows, all_turns, issues):
            if len(turns) >= 2:
                chains += issue is None
                decisions.append(
                    Decision(
                        row["sample_id"],
                        STAGE,
                        CHECK_SAMPLE,
                        "chain" if issue is None else "collapse",
                        detail={"reason": issue or self._complete},
                    )
                )
        counts = {
            "input": len(rows),
            "reflective_turns": len(pending),
            "chains": chains,
            "keyword_errors": sum(1 for k, _ in keywords if k is None),
            "rewrite_errors": sum(1 for d in decisions if d.check == CHECK_REWRITE and d.verdict != "ok"),
        }
        return StageResult(
            stage=STAGE,
            kept=with_chains(samples, all_turns, issues),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            components={
                "keywords": str(self.keywords),
                **({"rewriter": self.rewriter} if self.caption_order == "after_rewrite" else {}),
            },
        )

    # ------------------------------------------------------------------------ keywords
    def _keywords(self, ctx: StageContext, pending: list[_Turn]) -> list[tuple[str | None, dict[str, Any]]]:
        if isinstance(self.keywords, Heuristic):
            out = []
            for item in pending:
                truths = item.row["answers"]
                if item.domain == GENERAL_QA:
                    keyword, source = feedback_keyword(item.turn["feedback"], item.turn["answer"], truths), "feedback"
                else:
                    keyword, source = question_keyword(item.row["question"], truths), "question"
                out.append((keyword, {"keyword": keyword, "from": source}))
            return out
        try:
            return self._model_keywords(ctx, pending, self.keywords.name)
        finally:
            ctx.pool.release(self.keywords.name)

    def _model_keywords(
        self, ctx: StageContext, pending: list[_Turn], model: str
    ) -> list[tuple[str | None, dict[str, Any]]]:
        client = ctx.pool.client(model)
        general = [item for item in pending if item.domain == GENERAL_QA]
        dense = [item for item in pending if item.domain in DENSE_PERCEPTION]
        found: dict[str, tuple[str | None, dict[str, Any]]] = {}
        objects = ask_parsed(
            client,
            [
                objects_request(item.key, item.row["question"], item.turn["answer"], item.turn["feedback"])
                for item in general
            ],
            [objects_parser(item.row["answers"]) for item in general],
            OBJECTS_REMINDER,
            STAGE,
            "object1|object2|...",
        )
        listed = [(item, parsed) for item, parsed in zip(general, objects) if parsed.ok]
        for item, parsed in zip(general, objects):
            if not parsed.ok:
                found[item.key] = (None, {"from": "feedback", "objects_raw": parsed.raw, "error": parsed.error})
        captions = ask_parsed(
            client,
            [caption_request(item.key, parsed.label) for item, parsed in listed],
            [keyword_parser(item.row["answers"]) for item, _ in listed],
            KEYWORD_REMINDER,
            STAGE,
            "a caption",
        )
        for (item, objects_parsed), parsed in zip(listed, captions):
            found[item.key] = (
                parsed.label,
                {
                    "from": "feedback",
                    "objects": objects_parsed.label,
                    "raw": parsed.raw,
                    **({"error": parsed.error} if parsed.error else {}),
                },
            )
        subjects = ask_parsed(
            client,
            [subject_request(item.key, item.row["question"], item.row["answers"]) for item in dense],
            [keyword_parser(item.row["answers"], min_words=2) for item in dense],
            KEYWORD_REMINDER,
            STAGE,
            "a phrase",
        )
        for item, parsed in zip(dense, subjects):
            found[item.key] = (
                parsed.label,
                {"from": "question", "raw": parsed.raw, **({"error": parsed.error} if parsed.error else {})},
            )
        return [found[item.key] for item in pending]

    # ------------------------------------------------------------------------ rewrite
    def _rewrites(self, ctx: StageContext, items: list[_Turn]) -> list[Any]:
        if not items:
            return []
        try:
            requests = [rewrite_request(item.key, item.turn["feedback"]) for item in items]
            parsers = [rewrite_parser(item.turn["feedback"], item.row["answers"]) for item in items]
            return ask_parsed(
                ctx.pool.client(self.rewriter), requests, parsers, REWRITE_REMINDER, STAGE, "a first-person rewrite"
            )
        finally:
            ctx.pool.release(self.rewriter)
