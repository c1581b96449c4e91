"""RefLVQA, optional stage after the citations: Kestrel's claim-level verification of every
fact-checkable sentence (seed 000; ``judging.claims`` for the records, rule and gate).

For each fact-checkable sentence:

1. claims: typed claims of the sentence (``reflvqa.verification.claims``: a model asked for
   JSON, or the ``heuristic`` stand-in: the sentence as one typed claim);
2. evidence: the text documents the citation stage judged for the sentence (its
   ``retrieved_text``, after any cutoff), as items ``e1, e2, ...`` in retrieval order, ids
   that stay the same in every round; a sentence with no such document is not verified;
3. rounds: the verifier model checks the claims against the evidence, at most
   ``gate.max_rounds`` times, stopping after ``gate.stable_rounds`` supported rounds in a row
   (``judging.claim_verification``); a contradiction does not stop them (Kestrel revises and
   verifies again, seed 000 3.4);
4. the change gate decides, round by round in order, whether the sentence's citations change
   (Kestrel's evidence-gated update): a gated *supported* round adds the documents its claims
   cite (and clears the flag); a gated *contradicted* round removes the citations of the
   documents that refuted the sentence (those the confidently contradicted claims cite), keeps
   its other citations, and flags it. Anything else, including an error, changes nothing.

Ledger rows (model = the verifier): ``verify.claim`` per claim and round (context
``s<i>/<claim id>``, verdict = the claim's status, detail: type, text, confidence against
its threshold, why, cited evidence ids and documents), ``verify.sentence`` per sentence
(context ``s<i>``, verdict supported / contradicted / insufficient / error, detail: claims,
evidence, rounds, why it stopped, the revisions of each gated round, citations before and after) and one
``verify.sample`` per sample. ``mmcurate why`` renders the claim rows as a trace.
No sample is dropped: the stage annotates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mmcurate.benchmarks.reflvqa import SentenceVerification
from mmcurate.core.errors import MmcurateError
from mmcurate.core.ledger import Decision
from mmcurate.core.schema import SENTENCE
from mmcurate.core.specs import KBSpec
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.judging.claim_extraction import extract_claims, extractor_name
from mmcurate.judging.claim_verification import ClaimTask, verify_claims
from mmcurate.judging.claims import Evidence, Outcome, refuting
from mmcurate.retrieval.kb import load_corpora
from mmcurate.retrieval.rag import passage

STAGE = "verification"
CHECK_CLAIM = "verify.claim"
CHECK_SENTENCE = "verify.sentence"
CHECK_SAMPLE = "verify.sample"
COUNTS = (
    "sentences",
    "verified",
    "supported",
    "contradicted",
    "insufficient",
    "errors",
    "no_evidence",
    "changed",
    "citations_added",
    "citations_removed",
    "rounds",
)

Key = tuple[str, int]  # (sample_id, sentence index)


@dataclass
class VerifySentences(Stage):
    """Verify every fact-checkable sentence claim by claim; change citations only through the gate."""

    corpora: list[KBSpec]
    config: SentenceVerification
    corpus_limit: int | None = None
    name = STAGE

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        for name in ("sentences", "retrieved_text"):
            if name not in samples.column_names:
                raise MmcurateError(f"sentence verification needs the citation stage's output (a {name!r} column)")
        rows = samples.to_pylist()
        evidence = self._evidence(rows)
        wanted = [(row, s) for row in rows for s in row["sentences"] if s["fact_checkable"]]
        with_evidence = [(row, s) for row, s in wanted if evidence.get((row["sample_id"], s["index"]))]
        claims = extract_claims(
            self.config.claims,
            [(f"{r['sample_id']}/s{s['index']}", s["text"], r["question"]) for r, s in with_evidence],
            ctx.pool,
            STAGE,
        )
        tasks = {
            (r["sample_id"], s["index"]): ClaimTask(
                f"{r['sample_id']}/s{s['index']}", s["text"], label.label, evidence[(r["sample_id"], s["index"])]
            )
            for (r, s), label in zip(with_evidence, claims)
            if label.ok and label.label
        }
        try:
            outcomes = (
                dict(
                    zip(
                        tasks,
                        verify_claims(
                            ctx.pool.client(self.config.verifier), list(tasks.values()), self.config.gate, STAGE
                        ),
                    )
                )
                if tasks
                else {}
            )
        finally:
            ctx.pool.release(self.config.verifier)
        problems = {
            (r["sample_id"], s["index"]): label.error or "no claim"
            for (r, s), label in zip(with_evidence, claims)
            if not (label.ok and label.label)
        }

        decisions: list[Decision] = []
        counts = dict.fromkeys(COUNTS, 0)
        column: list[list[dict]] = []
        for row in rows:
            entries = []
            for s in row["sentences"]:
                key = (row["sample_id"], s["index"])
                entry = dict(s)
                if s["fact_checkable"]:
                    entry = self._judge(
                        row,
                        s,
                        evidence.get(key, []),
                        tasks.get(key),
                        outcomes.get(key),
                        problems.get(key),
                        decisions,
                        counts,
                    )
                entries.append(entry)
            column.append(entries)
            decisions.append(
                Decision(
                    row["sample_id"],
                    STAGE,
                    CHECK_SAMPLE,
                    "keep",
                    model=self.config.verifier,
                    detail={
                        "flagged": sum(e["flagged"] for e in entries),
                        "cited_sentences": sum(bool(e["text_citations"] or e["image_citations"]) for e in entries),
                    },
                )
            )
        kept = samples.drop_columns(["sentences"]).append_column("sentences", pa.array(column, type=pa.list_(SENTENCE)))
        claims_by = extractor_name(self.config.claims)
        return StageResult(
            stage=STAGE,
            kept=kept,
            decisions=decisions,
            run_id=ctx.run_id,
            counts={"input": len(rows), "kept": len(rows), **counts},
            extra={"verifier": self.config.verifier, "claims": claims_by},
            components={"claim_extractor": claims_by, "claim_verifier": f"llm:{self.config.verifier}"},
        )

    def _evidence(self, rows: list[dict[str, Any]]) -> dict[Key, list[Evidence]]:
        """Each fact-checkable sentence's judged text documents as evidence items e1, e2, ..."""
        needed = {doc for row in rows for r in row["retrieved_text"] for doc in r["doc_ids"]}
        texts: dict[str, str] = {}
        if needed:
            kb = load_corpora(self.corpora, self.corpus_limit)
            for doc_id, title, text in zip(*(kb[c].to_pylist() for c in ("doc_id", "title", "text"))):
                if doc_id in needed:
                    texts[doc_id] = passage(title, text)
        missing = sorted(needed - set(texts))
        if missing:
            raise MmcurateError(f"sentence verification: document {missing[0]!r} is not in the text corpus")
        out: dict[Key, list[Evidence]] = {}
        for row in rows:
            for r in row["retrieved_text"]:
                out[(row["sample_id"], r["index"])] = [
                    Evidence(f"e{n}", texts[doc], doc) for n, doc in enumerate(r["doc_ids"], 1)
                ]
        return out

    def _judge(
        self,
        row: dict[str, Any],
        sentence: dict[str, Any],
        evidence: list[Evidence],
        task: ClaimTask | None,
        outcome: Outcome | None,
        problem: str | None,
        decisions: list[Decision],
        counts: dict[str, int],
    ) -> dict[str, Any]:
        """The sentence after verification, with its ledger rows."""
        sid, index = row["sample_id"], sentence["index"]
        counts["sentences"] += 1
        before = {"text_citations": list(sentence["text_citations"]), "flagged": bool(sentence["flagged"])}
        detail: dict[str, Any] = {
            "sentence": index,
            "text": sentence["text"],
            "claims_by": extractor_name(self.config.claims),
            "evidence": {e.id: e.source for e in evidence},
            "before": before,
        }
        entry = dict(sentence)
        if not evidence:
            counts["no_evidence"] += 1
            verdict, detail["reason"] = "insufficient", "no retrieved document to check against"
        elif task is None or outcome is None:
            counts["errors"] += 1
            verdict, detail["error"] = "error", f"claim extraction: {problem}"
        else:
            counts["verified"] += 1
            counts["rounds"] += len(outcome.rounds)
            verdict = outcome.verdict
            detail.update(
                claims=[c.as_json() for c in task.claims],
                rounds=len(outcome.rounds),
                stopped=outcome.stopped,
                gated=outcome.gated,
                round_verdicts=[r.verdict for r in outcome.rounds],
                stated_verdicts=[r.record.verdict if r.record else None for r in outcome.rounds],
            )
            if outcome.verdict == "error":
                counts["errors"] += 1
                last = outcome.rounds[-1]
                detail.update(error=last.error, raw=last.raw)
            self._claim_rows(sid, index, task, outcome, decisions)
            entry, detail["revisions"] = self._change(entry, task, outcome, counts)
        if verdict in ("supported", "contradicted", "insufficient"):
            counts[verdict] += 1
        detail["after"] = {"text_citations": list(entry["text_citations"]), "flagged": bool(entry["flagged"])}
        decisions.append(
            Decision(
                sid, STAGE, CHECK_SENTENCE, verdict, model=self.config.verifier, context_id=f"s{index}", detail=detail
            )
        )
        return entry

    def _claim_rows(self, sid: str, index: int, task: ClaimTask, outcome: Outcome, decisions: list[Decision]) -> None:
        source = {e.id: e.source for e in task.evidence}
        for round_ in outcome.rounds:
            if round_.record is None:
                continue
            for claim in task.claims:
                check = round_.record.of(claim.id)
                threshold = self.config.gate.thresholds[claim.type]
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_CLAIM,
                        check.status,
                        model=self.config.verifier,
                        context_id=f"s{index}/{claim.id}",
                        detail={
                            "sentence": index,
                            "round": round_.number,
                            "claim": claim.id,
                            "type": claim.type,
                            "text": claim.text,
                            "confidence": check.confidence,
                            "threshold": threshold,
                            "confident": check.confidence >= threshold,
                            "why": check.why,
                            "citations": list(check.citations),
                            "documents": [source[c] for c in check.citations],
                        },
                    )
                )

    def _change(
        self, entry: dict[str, Any], task: ClaimTask, outcome: Outcome, counts: dict[str, int]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Apply every gated round to the sentence in order (see the module docstring); the
        sentence after them and what each gated round changed."""
        source = {e.id: e.source for e in task.evidence}
        old, was_flagged = list(entry["text_citations"]), bool(entry["flagged"])
        cites, flagged = list(old), was_flagged
        revisions = []
        for round_ in outcome.rounds:
            if not round_.gated:
                continue
            record = round_.record
            assert record is not None  # a gated round has a record
            if round_.verdict == "supported":
                new = list(dict.fromkeys([*cites, *(source[c] for check in record.checked for c in check.citations)]))
                flagged = False
            else:  # contradicted: only the refuting documents' citations go
                refuted = {source[e] for e in refuting(record, task.claims, self.config.gate)}
                new = [doc for doc in cites if doc not in refuted]
                flagged = True
            revisions.append(
                {
                    "round": round_.number,
                    "verdict": round_.verdict,
                    "flagged": flagged,
                    "added": [d for d in new if d not in cites],
                    "removed": [d for d in cites if d not in new],
                }
            )
            cites = new
        if cites != old or flagged != was_flagged:
            counts["changed"] += 1
        counts["citations_added"] += len(set(cites) - set(old))
        counts["citations_removed"] += len(set(old) - set(cites))
        return {**entry, "text_citations": cites, "flagged": flagged}, revisions
