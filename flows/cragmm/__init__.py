"""CRAG-MM's (and CRUISE's) Prefect flows (the list of every module of the benchmark: ``benchmarks/cragmm.py``)."""
