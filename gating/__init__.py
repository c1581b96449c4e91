"""Stage I of DeflectionBench (Algorithm 1, first loop): parametric gating (``parametric``),
and the prompts the DeflectionBench stages and its evaluation send (``prompts``)."""
