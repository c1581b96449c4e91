"""CRAG-MM's (and CRUISE's) releases (the list of every module of the benchmark: ``benchmarks/cragmm.py``)."""
