"""Stages that label samples, one module per stage, grouped by benchmark:

- ``deflectionbench/``: Stage II knowledge pairing (``pairing``, with distractor ``mining``)
  and Stage III oracle checks (``oracle``) of Algorithm 1 (Stage I is ``gating.parametric``);
- ``reflvqa/``: image relevance, image necessity, fact-checkable sentences, citations;
- ``reflectv/``: dialogues, trajectory filter, reflections, grounding and marks, visual check, formatting;
- ``human/``: labelling batches for people, labels imported back, agreement statistics;

and at the top what two benchmarks share: near-duplicates (``dedup``), the grounders
(``grounders``) and the marks they place (``marks``), ReflectV's and Kestrel's.
"""
