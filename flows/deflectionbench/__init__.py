"""VLM-DeflectionBench's Prefect flows (the list of every module of the benchmark: ``benchmarks/deflectionbench.py``)."""
