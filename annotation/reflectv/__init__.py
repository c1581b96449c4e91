"""ReflectV stages (MIRROR, seed paper 002, section 4), in flow order:

- ``dialogue``: student-teacher dialogues (built with two models, or ingested from FIRE);
- ``trajectory``: keep strictly ascending scores that end at 10 and agree with the ground truth;
- ``reflection``: grounding keywords per reflective turn, and the feedback rewritten in the first person;
- ``grounding``: locate each keyword, draw the marks (``annotation.marks``), word them into the reflection (``wording``);
- ``visual``: a vision model checks that the marks show what the reflection names;
- ``formatting``: multi-turn chains and collapsed QA pairs at the share rho, every turn in the
  ``<answer>/<think>/<tool_call>`` format and checked by its validator (``turns``).

``chains`` holds the per-turn columns these stages fill in on the sample table; the grounding
components (boxes, saliency, pointing, SAM 2) are ``annotation.grounders``, which Kestrel's loop
(``evaluation.pope.kestrel``) shares.
"""
