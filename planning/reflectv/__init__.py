"""ReflectV's (MIRROR) plans (the list of every module of the benchmark: ``benchmarks/reflectv.py``)."""
