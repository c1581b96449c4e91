"""A plan: expected requests, tokens, device-hours and cost per stage, step and model, as
rows a terminal, a Prefect artifact or a test can read, and beside what a run spent."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mmcurate.core.config import ModelSpec, Settings
from mmcurate.core.plural import counted, listed
from mmcurate.models.requests import ChatRequest

from . import throughput
from .kb import KBPlan
from .tokens import completion_budget, prompt_tokens


@dataclass(frozen=True)
class PlanRow:
    stage: str  # "I", "III", "necessity", ...
    step: str  # the call counter's stage name: "parametric", "oracle.gold", ...
    model: str
    requests: float
    prompt_tokens: float
    completion_tokens: float
    hours: float | None  # GPU-hours (CPU-hours for the embedded backend); None: nothing runs locally
    cost: float | None  # USD; None: unknown (a billed model without its price)


UNKNOWN_COST = "price not set: cost unknown"


def money(cost: float | None) -> str:
    """A cost as the plan shows it: never 0 for one that is unknown."""
    return "unknown" if cost is None else f"{cost:,.2f}"


def throughput_sources(settings: Settings, rows: Iterable[PlanRow]) -> dict[str, str]:
    """Where the throughput figure of each model in ``rows`` comes from, by model name."""
    return {name: throughput.throughput(settings.model(name))[1] for name in sorted({r.model for r in rows})}


def elimination(items: float, rates: Sequence[float], models: int) -> list[float]:
    """Items each of ``models`` models is asked about when model i settles the share
    ``rates[i]`` of what it gets (positions past ``rates`` repeat its last rate): early
    elimination, ``[n, n(1-r0), n(1-r0)(1-r1), ...]``."""
    asked, left = [], items
    for i in range(models):
        asked.append(left)
        left *= 1 - (rates[min(i, len(rates) - 1)] if rates else 0.0)
    return asked


def remaining(items: float, rates: Sequence[float], models: int) -> float:
    """Items no model settled: what is left after the last model."""
    asked = elimination(items, rates, models)
    return asked[-1] * (1 - (rates[min(models - 1, len(rates) - 1)] if rates else 0.0)) if asked else items


def words(count: float) -> str:
    """A stand-in text of ``count`` words (rounded, at least one)."""
    return " ".join(["word"] * max(1, round(count)))


def plan_row(
    stage: str,
    step: str,
    spec: ModelSpec,
    requests: float,
    examples: Iterable[ChatRequest],
    measured_completion: float | None = None,
) -> PlanRow:
    """One row: ``requests`` calls shaped like ``examples`` (built with the stage's own request
    builders), tokens by ``planning.tokens``, completion measured when a release gives it."""
    examples = list(examples)
    if not examples:
        raise ValueError(f"no example request to size {step} for {spec.name}")
    prompt = sum(prompt_tokens(r, spec) for r in examples) / len(examples)
    completion = (
        measured_completion
        if measured_completion is not None
        else sum(completion_budget(r, spec) for r in examples) / len(examples)
    )
    prompt_total, completion_total = requests * prompt, requests * completion
    return PlanRow(
        stage,
        step,
        spec.name,
        requests,
        prompt_total,
        completion_total,
        throughput.hours(prompt_total + completion_total, spec),
        throughput.cost(prompt_total, completion_total, spec),
    )


@dataclass
class Plan:
    benchmark: str
    samples: int
    samples_from: str
    rates_from: str
    funnel: list[tuple[str, float]]  # (stage, samples expected after it)
    rows: list[PlanRow]
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # model -> where its throughput comes from
    kb: KBPlan | None = None  # Stage II's knowledge base: pages, embedding hours, disk, index
    uncounted: list[str] = field(default_factory=list)  # sources left out of ``samples``: no count

    @classmethod
    def priced(cls, settings: Settings, rows: list[PlanRow], **fields: Any) -> Plan:
        """A plan of ``rows`` with where each of their models' throughput figure comes from."""
        return cls(rows=rows, sources=throughput_sources(settings, rows), **fields)

    def total(self) -> PlanRow:
        """The sums; the cost is unknown when any row's is."""
        hours = [r.hours for r in self.rows if r.hours is not None]
        costs = [r.cost for r in self.rows]
        return PlanRow(
            "total",
            "",
            "",
            sum(r.requests for r in self.rows),
            sum(r.prompt_tokens for r in self.rows),
            sum(r.completion_tokens for r in self.rows),
            sum(hours) if hours else None,
            None if None in costs else sum(c for c in costs if c is not None),
        )

    def unpriced(self) -> list[str]:
        """The models whose cost is unknown (billed, price not set)."""
        return list(dict.fromkeys(r.model for r in self.rows if r.cost is None))

    def unpriced_note(self) -> str | None:
        """The line under the table saying which costs are unknown, and what the priced rows cost."""
        models = self.unpriced()
        if not models:
            return None
        known = sum(r.cost for r in self.rows if r.cost is not None)
        return (
            f"{UNKNOWN_COST} for {listed(models)} (an API not on this machine may bill per token: set "
            f"price_input_per_mtok and price_output_per_mtok, 0 for a server of your own); the other rows cost "
            f"{known:,.2f} $"
        )

    def table(self) -> list[dict]:
        """The rows as plain dicts, rounded (for artifacts and JSON)."""
        return [
            {
                **asdict(r),
                "requests": round(r.requests),
                "prompt_tokens": round(r.prompt_tokens),
                "completion_tokens": round(r.completion_tokens),
                "hours": None if r.hours is None else round(r.hours, 3),
                "cost": None if r.cost is None else round(r.cost, 2),
            }
            for r in [*self.rows, self.total()]
        ]

    def against(self, spent: Iterable[dict]) -> list[dict]:
        """Plan beside what a run spent, per (step, model): planned requests and tokens; the
        run's requests (calls + cache hits), calls, cache hits and the usage tokens its
        backends reported. ``spent`` are call-counter rows (``CallCounter.rows()``)."""
        actual = {(r["stage"], r["model"]): r for r in spent}
        out = []
        for row in self.rows:
            done = actual.pop((row.step, row.model), {})
            out.append(
                {
                    "stage": row.stage,
                    "step": row.step,
                    "model": row.model,
                    "planned_requests": round(row.requests),
                    "requests": done.get("calls", 0) + done.get("cache_hits", 0),
                    "calls": done.get("calls", 0),
                    "cache_hits": done.get("cache_hits", 0),
                    "planned_prompt_tokens": round(row.prompt_tokens),
                    "prompt_tokens": done.get("prompt_tokens", 0),
                    "planned_completion_tokens": round(row.completion_tokens),
                    "completion_tokens": done.get("completion_tokens", 0),
                }
            )
        for (step, model), done in sorted(actual.items()):  # spent but not planned
            out.append(
                {
                    "stage": "",
                    "step": step,
                    "model": model,
                    "planned_requests": 0,
                    "requests": done["calls"] + done["cache_hits"],
                    "calls": done["calls"],
                    "cache_hits": done["cache_hits"],
                    "planned_prompt_tokens": 0,
                    "prompt_tokens": done.get("prompt_tokens", 0),
                    "planned_completion_tokens": 0,
                    "completion_tokens": done.get("completion_tokens", 0),
                }
            )
        return out

    def render(self) -> str:
        """The plan as the terminal shows it."""
        left = listed(self.uncounted)
        if self.uncounted and not self.samples:
            return (
                f"plan: {self.benchmark}, samples unknown ({self.samples_from})\n"
                f"requests, tokens, GPU-hours and cost: unknown until {left} is counted\n"
            )
        lines = [f"plan: {self.benchmark}, {counted(self.samples, 'sample', grouped=True)} ({self.samples_from})"]
        if self.uncounted:
            lines.append(f"a lower bound: the samples of {left} are not counted")
        lines += [
            f"retention: {self.rates_from}",
            "expected: " + " -> ".join(f"{n:,.0f} {name}" for name, n in self.funnel),
            "",
        ]
        head = ("stage", "step", "model", "requests", "prompt tok", "compl. tok", "GPU-h", "cost $")
        body = [
            (
                r.stage,
                r.step,
                r.model,
                f"{r.requests:,.0f}",
                f"{r.prompt_tokens:,.0f}",
                f"{r.completion_tokens:,.0f}",
                "-" if r.hours is None else f"{r.hours:,.1f}",
                money(r.cost),
            )
            for r in [*self.rows, self.total()]
        ]
        widths = [max(len(str(c)) for c in column) for column in zip(head, *body)]
        for index, cells in enumerate([head, *body]):
            if index == len(body):  # before the total
                lines.append("  ".join("-" * w for w in widths))
            lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))))
        lines.append("")
        lines += [note for note in [self.unpriced_note()] if note]
        lines += [f"throughput of {model}: {where}" for model, where in self.sources.items()]
        lines += self.notes
        lines += self.kb.render() if self.kb is not None else []
        return "\n".join(lines).rstrip() + "\n"
