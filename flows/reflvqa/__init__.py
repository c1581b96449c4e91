"""RefLVQA's Prefect flows (the list of every module of the benchmark: ``benchmarks/reflvqa.py``)."""
