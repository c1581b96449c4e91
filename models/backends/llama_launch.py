"""``python -m mmcurate.models.backends.llama_launch <llama_cpp.server args>``.

Runs llama-cpp-python's OpenAI-compatible server with ggml's extra weight buffers (the
runtime repack and AMX buffer types) turned off. On CPUs that advertise AMX the AMX
matmul of llama-cpp-python 0.3.x segfaults at the first decode
(``ggml_backend_amx_mul_mat``); the server offers no flag for this, so the default
model parameters are adjusted before it loads the model. For a 135M model the plain CPU
kernels are fast enough.

The server stops when the process that started it dies (``core.lifeline``).
"""
from __future__ import annotations

import llama_cpp.llama_cpp as llama_lib

from mmcurate.core.lifeline import exit_with_parent


def main() -> None:
    exit_with_parent()
    default_params = llama_lib.llama_model_default_params

    def without_extra_buffers() -> llama_lib.llama_model_params:
        params = default_params()
        params.use_extra_bufts = False
        return params

    llama_lib.llama_model_default_params = without_extra_buffers
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
