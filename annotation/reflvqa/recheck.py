"""RefLVQA re-curation: a new text entailment judge decides the released citations again.

The paper picks one entailment model per modality (seed 004, section 3.3 and appendix A.4:
the one with the best F1 against people), so a better judge replaces the old one rather
than voting with it: for every fact-checkable sentence, the text documents the parent
judged (its ``citation.text`` ledger rows: the retrieved, cut candidates) are judged again
by the new judge, and the sentence cites exactly those it entails. Image citations are left
as they are (no image judge is re-run here). The documents' text comes from the release's
own knowledge base, so nothing is retrieved again and no corpus is needed.

A pair the judge already decided in an earlier version (recorded under its name in the
parent's ledger) is not judged again. Ledger rows: ``citation.text`` per judged pair (as the
citation stage writes them), and ``citation.recheck`` per QA pair (``changed`` when any
sentence's citations or flag changed, else ``keep``), naming the judge and what changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mmcurate.core.ledger import Decision
from mmcurate.core.schema import SENTENCE
from mmcurate.core.specs import EntailmentSpec
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.judging.entailment import LLMEntailment, entailment_judge
from mmcurate.judging.recorded import RecordedAnswers
from mmcurate.retrieval.rag import passage

from .citations import CHECK_TEXT, STAGE

CHECK_RECHECK = "citation.recheck"
Pair = tuple[str, int, str]  # (sample_id, sentence index, doc_id)


@dataclass
class RecheckCitations(Stage):
    """Judge the candidates of every fact-checkable sentence again (module docstring)."""

    judge: EntailmentSpec
    documents: dict[str, tuple[str | None, str]]  # text doc_id -> (title, text), from the release's knowledge base
    candidates: dict[tuple[str, int], list[str]] = field(default_factory=dict)  # (sample, sentence) -> doc ids
    recorded: RecordedAnswers | None = None
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        judge = entailment_judge(self.judge, ctx.models.pool if ctx.models else None)
        rows = samples.to_pylist()
        sentences = {(r["sample_id"], s["index"]): s for r in rows for s in r["sentences"]}
        pairs: list[Pair] = [
            (sid, index, doc)
            for (sid, index), s in sentences.items()
            if s["fact_checkable"]
            for doc in self.candidates.get((sid, index), [])
            if doc in self.documents
        ]
        decisions: list[Decision] = []
        verdicts: dict[Pair, str] = {}
        rest = pairs
        if self.recorded is not None:
            settled, rest = self.recorded.replay(judge.name, pairs, lambda p: (p[0], p[2], p[1]), CHECK_TEXT, decisions)
            verdicts.update(settled)
        try:
            supports = (
                judge.judge(
                    [passage(*self.documents[doc]) for _, _, doc in rest],
                    [sentences[(sid, index)]["text"] for sid, index, _ in rest],
                    [f"{sid}/s{index}/{doc}" for sid, index, doc in rest],
                )
                if rest
                else []
            )
        finally:
            if isinstance(judge, LLMEntailment):
                judge.close()
        for (sid, index, doc), support in zip(rest, supports):
            verdicts[(sid, index, doc)] = support.verdict
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_TEXT,
                    support.verdict,
                    model=judge.name,
                    context_id=doc,
                    detail={"sentence": index, "score": support.score, "recheck": True, **support.detail},
                )
            )
        column: list[list[dict[str, Any]]] = []
        counts = {
            "input": len(rows),
            "kept": len(rows),
            "pairs": len(pairs),
            "judged": len(rest),
            "changed": 0,
            "errors": sum(v == "error" for v in verdicts.values()),
        }
        for row in rows:
            sid, entries, changes = row["sample_id"], [], []
            for s in row["sentences"]:
                cited = (
                    [
                        doc
                        for doc in self.candidates.get((sid, s["index"]), [])
                        if verdicts.get((sid, s["index"], doc)) == "entail"
                    ]
                    if s["fact_checkable"]
                    else list(s["text_citations"])
                )
                flagged = bool(s["fact_checkable"]) and not cited and not s["image_citations"]
                if cited != list(s["text_citations"]) or flagged != s["flagged"]:
                    changes.append(
                        f"sentence {s['index']}: text citations {list(s['text_citations'])} -> {cited}"
                        + (f", flagged {s['flagged']} -> {flagged}" if flagged != s["flagged"] else "")
                    )
                entries.append({**s, "text_citations": cited, "flagged": flagged})
            column.append(entries)
            counts["changed"] += bool(changes)
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_RECHECK,
                    "changed" if changes else "keep",
                    model=judge.name,
                    detail={"reason": "; ".join(changes) or "citations unchanged", "deciding_model": judge.name},
                )
            )
        kept = samples.drop_columns(["sentences"]).append_column("sentences", pa.array(column, type=pa.list_(SENTENCE)))
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"text_judge": judge.name},
            components={"text_entailment": judge.name},
        )


def judged_candidates(ledger: pa.Table) -> dict[tuple[str, int], list[str]]:
    """(sample_id, sentence index) -> the text documents a release's ledger records as judged
    for it (``citation.text`` rows), in the order they were first judged."""
    import pyarrow.compute as pc

    rows = ledger.filter(pc.and_(pc.equal(ledger["stage"], STAGE), pc.equal(ledger["check"], CHECK_TEXT)))
    out: dict[tuple[str, int], list[str]] = {}
    for row in rows.select(["sample_id", "context_id", "detail"]).to_pylist():
        sentence = json.loads(row["detail"] or "{}").get("sentence")
        docs = out.setdefault((row["sample_id"], sentence), [])
        if row["context_id"] not in docs:
            docs.append(row["context_id"])
    return out
