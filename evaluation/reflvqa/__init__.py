"""RefLVQA's evaluation (the list of every module of the benchmark: ``benchmarks/reflvqa.py``)."""
