"""RefLVQA's releases (the list of every module of the benchmark: ``benchmarks/reflvqa.py``)."""
