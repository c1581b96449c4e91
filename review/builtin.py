"""mmcurate's own judge reviews, registered as each benchmark's ``judge_review`` part on import
(``benchmarks.parts``): a layer that asks a benchmark for its judge review imports this first."""

from __future__ import annotations

from mmcurate.review.deflectionbench import judges as _deflectionbench  # noqa: F401
from mmcurate.review.reflvqa import judges as _reflvqa  # noqa: F401
