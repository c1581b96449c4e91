"""Stage I of DeflectionBench (Algorithm 1, first loop): parametric gating (``parametric``; what its
early elimination adds to a result, shared with Stage III, in ``elimination``), and the prompts the
DeflectionBench stages and its evaluation send (``prompts``)."""
