"""ReflectV's (MIRROR) releases (the list of every module of the benchmark: ``benchmarks/reflectv.py``)."""
