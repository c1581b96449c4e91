"""CRAG-MM's (and CRUISE's) evaluation (the list of every module of the benchmark: ``benchmarks/cragmm.py``)."""
