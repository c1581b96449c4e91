"""POPE's (and Kestrel's, MME-Hallucination's) Prefect flows (the list of every module of the benchmark: ``benchmarks/pope.py``)."""
