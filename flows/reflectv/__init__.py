"""ReflectV's (MIRROR) Prefect flows (the list of every module of the benchmark: ``benchmarks/reflectv.py``)."""
