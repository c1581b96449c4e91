"""Evaluating systems on released benchmarks.

DeflectionBench: the four scenarios (``scenarios``), their metrics and Table-4 markdown
(``metrics``), the strictness-sweep and negative-modality tables (``deflection_tables``) and
what a run writes (``report``).

RefLVQA: the RAG run (``reflvqa``) with its prompts (``reflvqa_prompts``), the strict reading
of cited answers (``cited_answers``), the evaluators (``graders``), the answer metrics
(``answer_metrics``), retrieval metrics (``retrieval_metrics``) and what a run writes
(``reflvqa_report``).
"""
