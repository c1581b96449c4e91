"""The model layer and parametric gating.

- Model layer: ``client`` (``ModelPool``: cached, counted calls), ``backends`` (OpenAI-
  compatible servers, vLLM offline, the embedded llama.cpp server, scripted models),
  ``cache`` (the SQLite response cache), ``requests``, ``prompts``, ``schedule``
  (model-major execution with early elimination), ``labels`` (the one strict label parser),
  ``models`` (opening the layer for one unit of work).
- Judges: ``judge`` (SimpleQA rubric; ``prejudge`` settles the easy cases), ``answers``
  (judging answers to samples), ``entailment`` (does a document support a statement).
- Stage I of DeflectionBench (Algorithm 1): ``parametric``.
"""
