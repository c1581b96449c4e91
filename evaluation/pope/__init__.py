"""POPE's (and Kestrel's, MME-Hallucination's) evaluation (the list of every module of the benchmark: ``benchmarks/pope.py``)."""
