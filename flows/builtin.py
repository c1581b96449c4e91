"""mmcurate's own flows and steps, registered as each benchmark's ``curate``, ``recurate`` and
``evaluate`` parts on import (``benchmarks.parts``): a layer that asks a benchmark for them imports
this first."""

from __future__ import annotations

from mmcurate.flows.cragmm import curate as _cragmm_curate  # noqa: F401
from mmcurate.flows.cragmm import evaluate as _cragmm_evaluate  # noqa: F401
from mmcurate.flows.deflectionbench import curate as _deflectionbench_curate  # noqa: F401
from mmcurate.flows.deflectionbench import evaluate as _deflectionbench_evaluate  # noqa: F401
from mmcurate.flows.deflectionbench import recurate as _deflectionbench_recurate  # noqa: F401
from mmcurate.flows.pope import curate as _pope_curate  # noqa: F401
from mmcurate.flows.pope import evaluate as _pope_evaluate  # noqa: F401
from mmcurate.flows.reflectv import curate as _reflectv_curate  # noqa: F401
from mmcurate.flows.reflectv import recurate as _reflectv_recurate  # noqa: F401
from mmcurate.flows.reflvqa import curate as _reflvqa_curate  # noqa: F401
from mmcurate.flows.reflvqa import evaluate as _reflvqa_evaluate  # noqa: F401
from mmcurate.flows.reflvqa import recurate as _reflvqa_recurate  # noqa: F401
