"""ReflectV's (MIRROR) evaluation (the list of every module of the benchmark: ``benchmarks/reflectv.py``)."""
