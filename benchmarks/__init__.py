"""The benchmarks mmcurate curates and evaluates, one ``Benchmark`` object each, registered in
``registry`` (light to import: it imports only ``core``); the layers that own a benchmark's
parts register them (``parts``)."""

from __future__ import annotations

from .benchmark import Benchmark, Evaluation
from .parts import register_adapter, register_part, registered_part
from .registry import BENCHMARKS, curated, get, register

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Evaluation",
    "curated",
    "get",
    "register",
    "register_adapter",
    "register_part",
    "registered_part",
]
