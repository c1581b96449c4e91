"""RefLVQA's plans (the list of every module of the benchmark: ``benchmarks/reflvqa.py``)."""
