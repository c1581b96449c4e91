"""Evaluating systems on released benchmarks: DeflectionBench's four scenarios
(``scenarios``), their metrics and Table-4 markdown (``metrics``) and what an evaluation
run writes (``report``)."""
