"""VLM-DeflectionBench's plans (the list of every module of the benchmark: ``benchmarks/deflectionbench.py``)."""
