"""The search queries a model under test writes for a RefLVQA question (seed 004, section 4:
"the VLM generates N search queries"; prompt in the spirit of its Table 14), read strictly.

A reply is readable when it holds exactly N queries, either one per line or, as the paper's
prompt asks, on one line as quoted strings separated by commas (``"q1", "q2"``). A line may
carry a list marker (``1.``, ``2)``, ``-``, ``*``) and surrounding quotes, which are dropped;
every query must hold a letter or a digit. Anything else (a preamble line, N - 1 or N + 1
queries, an empty reply) is unreadable: one retry with a reminder, then a counted error
(``models.labels.ask_parsed``), never a guessed query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mmcurate.models.labels import Label, ask_parsed
from mmcurate.models.requests import ChatRequest

from .prompts import QUERIES_TEMPLATE, queries_messages, queries_reminder

STAGE = "evaluate.reflvqa.queries"
_MARKER = re.compile(r"^(\d+[.)]|[-*\u2022])\s+")
_QUOTED_LIST = re.compile(r'^\s*"[^"]*"(\s*,\s*"[^"]*")+\s*,?\s*$')


def _query(line: str) -> str | None:
    text = _MARKER.sub("", line.strip()).strip().strip("\"'`").strip()
    return text if any(c.isalnum() for c in text) else None


def parse_queries(text: str, n: int) -> tuple[str, ...] | None:
    """The ``n`` queries of a reply, or None when it does not hold exactly ``n`` (see the module docstring)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if len(lines) == 1 and n > 1 and _QUOTED_LIST.match(lines[0]):
        lines = re.findall(r'"([^"]*)"', lines[0])
    queries = [_query(line) for line in lines]
    if len(queries) != n or None in queries:
        return None
    return tuple(queries)  # type: ignore[arg-type]


def queries_request(row: Mapping[str, Any], n: int, max_tokens: int) -> ChatRequest:
    """The request for ``n`` queries of one question (``max_tokens`` per query)."""
    return ChatRequest(
        key=f"{row['sample_id']}/queries/{n}",
        template=QUERIES_TEMPLATE,
        max_tokens=max_tokens * n,
        messages=queries_messages(row["question"], row["images"], n),
    )


def write_queries(qa: Sequence[Mapping[str, Any]], n: int, pool: Any, model: str, max_tokens: int) -> list[Label]:
    """Per question its ``n`` queries (``Label.label``, a tuple) or the error, one batch
    (counted under ``evaluate.reflvqa.queries.n<N>``)."""
    return ask_parsed(
        pool.client(model),
        [queries_request(row, n, max_tokens) for row in qa],
        lambda text: parse_queries(text, n),
        queries_reminder(n),
        f"{STAGE}.n{n}",
        f"exactly {n} search quer{'y' if n == 1 else 'ies'}",
    )
