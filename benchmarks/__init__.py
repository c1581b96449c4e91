"""The benchmarks mmcurate curates and evaluates, one ``Benchmark`` object each, registered in
``registry`` (light to import: it imports only ``core``, and the parts load when used)."""
from __future__ import annotations

from .benchmark import Benchmark, Evaluation
from .registry import BENCHMARKS, curated, get, register

__all__ = ["BENCHMARKS", "Benchmark", "Evaluation", "curated", "get", "register"]
