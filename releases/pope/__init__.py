"""POPE's (and Kestrel's, MME-Hallucination's) releases (the list of every module of the benchmark: ``benchmarks/pope.py``)."""
