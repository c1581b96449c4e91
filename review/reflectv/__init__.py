"""ReflectV's (MIRROR) human review (the list of every module of the benchmark: ``benchmarks/reflectv.py``)."""
