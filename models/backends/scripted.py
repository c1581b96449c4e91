"""Scripted model: deterministic answers from JSONL rules, for tests, demos and audits.

One rule per line: ``{"when_all": [str, ...], "when_none": [str, ...], "answer": str}``.
A request gets the answer of the first rule whose ``when_all`` substrings all occur and
whose ``when_none`` substrings all do not occur in the text of its messages (text parts
only, joined by newlines; matching is case-sensitive). Otherwise ``spec.default``; with no
default the request fails with an error like any failed model call.

A rule may say how long its answer "takes" (``"seconds": 4.0``): the response reports that
latency instead of the microseconds a script really takes, so a time budget (CRUISE's
10-second turn) can be tested deterministically, without sleeping.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mmcurate.core.config import ModelSpec
from mmcurate.models.backends.base import Backend, BackendError, OnResult
from mmcurate.models.requests import ChatRequest, ChatResponse, sampling, text_of


@dataclass(frozen=True)
class Rule:
    answer: str
    when_all: tuple[str, ...] = ()
    when_none: tuple[str, ...] = ()
    seconds: float | None = None  # the latency to report (None: the real one)

    def matches(self, text: str) -> bool:
        return all(s in text for s in self.when_all) and not any(s in text for s in self.when_none)


def load_rules(path: Path) -> list[Rule]:
    rules: list[Rule] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BackendError(f"cannot read script {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if set(raw) - {"when_all", "when_none", "answer", "seconds"} or not isinstance(raw["answer"], str):
                raise ValueError("keys must be when_all, when_none, answer (a string), seconds")
            when_all, when_none = raw.get("when_all", []), raw.get("when_none", [])
            if not all(isinstance(s, str) for s in [*when_all, *when_none]):
                raise ValueError("when_all/when_none must be lists of strings")
            seconds = raw.get("seconds")
            if seconds is not None and (
                isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0
            ):
                raise ValueError("seconds must be a number >= 0")
            rules.append(
                Rule(raw["answer"], tuple(when_all), tuple(when_none), None if seconds is None else float(seconds))
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BackendError(f"{path}:{number}: bad rule: {exc}") from None
    return rules


class ScriptedBackend(Backend):
    def __init__(self, spec: ModelSpec) -> None:
        assert spec.script is not None  # ModelSpec validation guarantees it
        self.spec = spec
        self.rules = load_rules(spec.script)
        # edits to the script must not be served stale answers from the cache
        self.identity = {"script_sha256": hashlib.sha256(spec.script.read_bytes()).hexdigest()}
        # what each request asked of the model, in order: its sampling parameters (which a script
        # ignores) and messages, so tests can check what reached the model
        self.asked: list[tuple[dict, list[dict]]] = []

    def rule(self, request: ChatRequest) -> Rule | None:
        text = text_of(request.messages)
        return next((rule for rule in self.rules if rule.matches(text)), None)

    def answer(self, request: ChatRequest) -> str | None:
        rule = self.rule(request)
        return rule.answer if rule is not None else self.spec.default

    def run(self, requests: Sequence[ChatRequest], on_result: OnResult) -> None:
        for index, request in enumerate(requests):
            started = time.perf_counter()
            self.asked.append((sampling(self.spec, request), request.messages))
            rule = self.rule(request)
            answer = rule.answer if rule is not None else self.spec.default
            seconds = rule.seconds if rule is not None and rule.seconds is not None else None
            on_result(
                index,
                ChatResponse(
                    key=request.key,
                    model=self.spec.name,
                    text=answer,
                    error=None if answer is not None else "no scripted rule matched and the model has no default",
                    cached=False,
                    latency=time.perf_counter() - started if seconds is None else seconds,
                ),
            )
