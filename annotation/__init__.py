"""Stages that label samples, one module per stage, grouped by benchmark:

- ``deflectionbench/``: Stage II knowledge pairing (``pairing``, with distractor ``mining``)
  and Stage III oracle checks (``oracle``) of Algorithm 1 (Stage I is ``gating.parametric``);
- ``reflvqa/``: image relevance, image necessity, fact-checkable sentences, citations;
- ``reflectv/``: dialogues, trajectory filter, reflections, grounding and marks, visual check, formatting;
- ``human/``: labelling batches for people, labels imported back, agreement statistics.
"""
