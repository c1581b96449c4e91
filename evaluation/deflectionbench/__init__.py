"""VLM-DeflectionBench's evaluation (the list of every module of the benchmark: ``benchmarks/deflectionbench.py``)."""
