"""Judges: models and rules that grade what other models said.

``simpleqa`` (the SimpleQA rubric; ``prejudge`` settles the easy cases first), ``answers``
(judging answers to samples, shared by Stage I, Stage III and the evaluation),
``entailment`` (does a document support a statement), Kestrel's claim-level verification
(``claims``: records, verdict rule and change gate; ``claim_extraction``;
``claim_verification``), and ``session`` (the model layer opened for one unit of work, with
the run's judge).
"""
