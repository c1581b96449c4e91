"""VLM-DeflectionBench's releases (the list of every module of the benchmark: ``benchmarks/deflectionbench.py``)."""
