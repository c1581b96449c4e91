"""ReflectV stage 6 (seed paper 002, section 4.5 and 5.3.3): the hybrid composition, rendered.

Every sample that passed the trajectory filter becomes one of:

- a multi-turn chain: a verified dialogue of two or more turns, every turn rendered as
  ``<answer>/<think>/<tool_call>`` (``turns``) with the marked image of a turn's tool call as
  the next turn's image;
- a QA pair (I_0, q -> a_final): a one-turn dialogue, or a chain that failed a later stage
  (its ``chain_issue``), rendered as one turn that calls no tool.

Every rendered conversation is checked by the validator of ``turns`` first: a chain that
fails it becomes a QA pair (its reason names the broken rules), a QA pair that fails it is
dropped. Only then is the share of chains brought to ``rho`` (default 0.75; a split made
before validation fell below rho whenever a kept chain then failed). The paper reaches rho
by collapsing chains only: "Truncated QA collapses failed or redundant sequences into QA
pairs" (002 section 4.5); it drops no QA pair. So (``reflectv.rho_rule``):

- ``collapse`` (the default, the paper's): more chains than rho asks for (chains >= rho *
  total): keep ceil(rho * total) chains and collapse the rest to QA pairs ("redundant"
  chains); fewer: keep everything, and the release's share of chains stays below rho (its
  statistics say so);
- ``collapse_or_drop`` (a reading of its own, the rule before): the same when there are
  enough chains; with fewer, keep every chain and floor(chains * (1 - rho) / rho) QA pairs,
  the surplus pairs dropped (ledger reason), so the share never falls below rho. With no
  chain at all nothing is dropped: rho cannot be reached.

Which chains collapse and which pairs drop is a seeded order, sha256(seed, sample id), so it
does not depend on the input order or on sharding. rho is exact (a fraction of its decimal
form). A collapsed chain whose QA pair breaks the format is dropped, which only raises the
share.

``depth`` is the number of reflective rounds a released conversation holds (MIRROR's
Figure 5c): its turns that call the tool, so a chain of n student answers has n - 1 and a
QA pair 0.

The final turn's ``<think>`` is one of a few fixed first-person confirmations (the paper's
final turns read the same way), chosen by the seed.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pyarrow as pa

from mmcurate.core.domains import domain_of
from mmcurate.core.ledger import Decision
from mmcurate.core.stages import Stage, StageContext, StageResult
from mmcurate.core.visual_prompts import NONE

from .chains import issues_of, require_chains, turns_of
from .turns import conversation_defects, render_turn, tool_call
from .wording import seeded_index

STAGE = "format"
CHECK_SHARE = "format.rho.v1"
CHECK_VALID = "format.validate.v1"
CHECK_SAMPLE = "format.sample.v1"
MULTI, SINGLE = "multi_turn", "single_turn"
CHAIN_KEPT, REDUNDANT, SURPLUS = (
    "verified multi-turn chain",
    "redundant chain: rho reached",
    "surplus QA pair: rho reached",
)
FORMAT_DEFECTS = "format defects"
FINAL_THINKS = (
    "My answer now agrees with what the image shows; I see nothing left to correct.",
    "Looking at the image once more, my answer is consistent with the visual evidence.",
    "I have checked my answer against the details of the image and it holds up.",
)
CONVERSATION_TURN = pa.struct(
    [
        pa.field("turn", pa.int32(), nullable=False),
        pa.field("image", pa.string(), nullable=False),  # sha256 of the image this turn sees
        pa.field("text", pa.string(), nullable=False),
    ]
)
SAMPLE_FIELDS = [  # what a trajectory and a released dialogue say of their sample
    pa.field("sample_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("source_id", pa.string(), nullable=False),
    pa.field("domain", pa.string(), nullable=False),
    pa.field("question", pa.string(), nullable=False),
    pa.field("answers", pa.list_(pa.string()), nullable=False),
    pa.field("image", pa.string(), nullable=False),  # the original image
]
TRAJECTORY = pa.schema(
    [
        *SAMPLE_FIELDS,
        pa.field("format", pa.string(), nullable=False),  # multi_turn | single_turn
        pa.field("depth", pa.int32(), nullable=False),  # reflective rounds: the turns that call the tool
        pa.field("conversation", pa.list_(CONVERSATION_TURN), nullable=False),
        pa.field("meta", pa.string(), nullable=False),
    ]
)


def _order(seed: int, sample_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{sample_id}".encode()).hexdigest()


RHO_RULES = ("collapse", "collapse_or_drop")  # how rho is reached (module docstring); the first is the paper's


def rho_split(
    chains: list[str], pairs: list[str], rho: float, seed: int, rule: str = RHO_RULES[0]
) -> tuple[list[str], list[str], list[str]]:
    """(chains kept, chains collapsed to pairs, pairs dropped) by ``rule`` (module docstring)."""
    if rule not in RHO_RULES:
        raise ValueError(f"unknown rho rule {rule!r}; known: {', '.join(RHO_RULES)}")
    share = Fraction(str(rho))
    if not 0 <= share <= 1:
        raise ValueError(f"rho must be in [0, 1], got {rho}")
    chains = sorted(chains, key=lambda s: _order(seed, s))
    pairs = sorted(pairs, key=lambda s: _order(seed, s))
    total = len(chains) + len(pairs)
    if total == 0:
        return [], [], []
    if len(chains) >= share * total:
        keep = math.ceil(share * total)
        return chains[:keep], chains[keep:], []
    if not chains or rule == "collapse":
        return chains, [], []
    keep_pairs = math.floor(len(chains) * (1 - share) / share)
    return chains, [], pairs[keep_pairs:]


def final_think(seed: int, sample_id: str) -> str:
    return FINAL_THINKS[seeded_index(seed, sample_id, "final", modulo=len(FINAL_THINKS))]


def render_turns(image: str, turns: list[dict[str, Any]], final: str) -> list[dict[str, Any]]:
    """The conversation of a chain, as far as the pipeline built it: turn k sees the image
    marked by turn k-1 (the original when that turn has no marks); a reflective turn thinks
    its reflection with the mark phrase (else the bare reflection, else the teacher's
    feedback) and calls the tool with the anchor, colour and mark type it has ("None" for
    what it lacks). A verified chain has them all, and then this is its training conversation."""
    out = []
    for k, turn in enumerate(turns):
        last = k == len(turns) - 1
        if last:
            think, call = final, tool_call(False)
        else:
            think = turn["think"] or turn["reflection"] or turn["feedback"]
            call = tool_call(True, turn["keyword"] or NONE, turn["color"] or NONE, turn["mark_type"] or NONE)
        seen = image if k == 0 else turns[k - 1]["marked_image"] or image
        out.append({"turn": k + 1, "image": seen, "text": render_turn(turn["answer"], think, call)})
    return out


def render_pair(image: str, answer: str, final: str) -> list[dict[str, Any]]:
    return [{"turn": 1, "image": image, "text": render_turn(answer, final, tool_call(False))}]


def _defects(conversation: list[dict[str, Any]], truths: list[str]) -> list[str]:
    return [f"turn {i + 1}: {rule}" for i, rule in conversation_defects([t["text"] for t in conversation], truths)]


@dataclass
class FormatTrajectories(Stage):
    """Chains and QA pairs at the share rho, rendered and validated (module docstring)."""

    rho: float = 0.75
    seed: int = 0
    rho_rule: str = RHO_RULES[0]
    name = STAGE
    shardable = False  # rho is a share of the whole release

    def run(self, samples: pa.Table, ctx: StageContext) -> StageResult:
        require_chains(samples, STAGE)
        rows = {r["sample_id"]: r for r in samples.to_pylist()}
        turns = dict(zip(rows, turns_of(samples)))
        issues = dict(zip(rows, issues_of(samples)))
        decisions: list[Decision] = []
        chains: dict[str, list[dict[str, Any]]] = {}
        pairs: dict[str, list[dict[str, Any]]] = {}
        pair_defects: dict[str, list[str]] = {}
        for sid, row in rows.items():  # render and validate first: the split counts only valid forms
            image, final = row["images"][0], final_think(self.seed, sid)
            truths = row["answers"]
            pairs[sid] = render_pair(image, turns[sid][-1]["answer"], final)
            pair_defects[sid] = _defects(pairs[sid], truths)
            if len(turns[sid]) >= 2 and issues[sid] is None:
                conversation = render_turns(image, turns[sid], final)
                defects = _defects(conversation, truths)
                decisions.append(
                    Decision(
                        sid,
                        STAGE,
                        CHECK_VALID,
                        "fail" if defects else "pass",
                        detail={"format": MULTI, "defects": defects},
                    )
                )
                if defects:
                    issues[sid] = f"{FORMAT_DEFECTS}: {', '.join(defects)}"
                else:
                    chains[sid] = conversation
        candidates = [sid for sid in rows if sid not in chains]
        for sid in candidates:
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_VALID,
                    "fail" if pair_defects[sid] else "pass",
                    detail={"format": SINGLE, "defects": pair_defects[sid]},
                )
            )
        pair_ids = [sid for sid in candidates if not pair_defects[sid]]
        split = rho_split(list(chains), pair_ids, self.rho, self.seed, self.rho_rule)
        kept_chains, collapsed, dropped = (set(ids) for ids in split)
        for sid in collapsed:
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_VALID,
                    "fail" if pair_defects[sid] else "pass",
                    detail={"format": SINGLE, "defects": pair_defects[sid]},
                )
            )
        out: list[dict[str, Any]] = []
        for sid, row in rows.items():
            if sid in candidates and pair_defects[sid]:
                decisions.append(Decision(sid, STAGE, CHECK_SAMPLE, "drop", detail={"reason": FORMAT_DEFECTS}))
                continue
            verdict = (
                "chain"
                if sid in kept_chains
                else "collapse"
                if sid in collapsed
                else "drop"
                if sid in dropped
                else "pair"
            )
            reason = {
                "chain": CHAIN_KEPT,
                "collapse": REDUNDANT,
                "drop": SURPLUS,
                "pair": issues[sid] or "single-turn dialogue",
            }[verdict]
            decisions.append(
                Decision(
                    sid,
                    STAGE,
                    CHECK_SHARE,
                    verdict,
                    detail={"rho": self.rho, "rho_rule": self.rho_rule, "reason": reason},
                )
            )
            if verdict == "drop" or (verdict == "collapse" and pair_defects[sid]):
                reason = SURPLUS if verdict == "drop" else FORMAT_DEFECTS
                decisions.append(Decision(sid, STAGE, CHECK_SAMPLE, "drop", detail={"reason": reason}))
                continue
            form = MULTI if verdict == "chain" else SINGLE
            conversation = chains[sid] if form == MULTI else pairs[sid]
            decisions.append(Decision(sid, STAGE, CHECK_SAMPLE, "keep", detail={"format": form}))
            out.append(
                {
                    "sample_id": sid,
                    "source": row["source"],
                    "source_id": row["source_id"],
                    "domain": domain_of(row["meta"]),
                    "question": row["question"],
                    "answers": row["answers"],
                    "image": row["images"][0],
                    "format": form,
                    "depth": len(conversation) - 1,
                    "conversation": conversation,
                    "meta": row["meta"],
                }
            )
        multi = sum(r["format"] == MULTI for r in out)
        counts = {
            "input": len(rows),
            "chains": len(chains),
            "pairs": len(pair_ids),
            "multi_turn": multi,
            "single_turn": len(out) - multi,
            "collapsed_for_rho": len(collapsed),
            "dropped_for_rho": len(dropped),
            "dropped_for_format": sum(
                d.check == CHECK_SAMPLE and (d.detail or {}).get("reason") == FORMAT_DEFECTS for d in decisions
            ),
            "kept": len(out),
        }
        return StageResult(
            stage=STAGE,
            kept=pa.Table.from_pylist(out, schema=TRAJECTORY),
            decisions=decisions,
            run_id=ctx.run_id,
            counts=counts,
            extra={"rho": self.rho, "rho_rule": self.rho_rule, "share": round(multi / len(out), 4) if out else None},
        )
