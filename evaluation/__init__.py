"""Evaluating systems on released benchmarks: one subpackage per benchmark (``deflectionbench``,
``reflvqa``, ``cragmm``, ``pope``, ``reflectv``; each benchmark's module lists them), and at the
top what several share: lmms-eval harness tasks (``harness``), where runs write (``runs``), the one
failure policy (``failures``), CRAG scoring (``crag``), verification-first answering
(``verify_first``), the decoding settings (``decoding``), retrieval metrics (``retrieval_metrics``),
figures, run comparison (``compare``) and an item's trace (``why``).
"""
