"""RefLVQA's human review (the list of every module of the benchmark: ``benchmarks/reflvqa.py``)."""
