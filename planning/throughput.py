"""Compute time and price of tokens: each model's throughput and prices, with sourced defaults.

``ModelSpec.tokens_per_second`` (per GPU, prompt plus completion tokens) wins when set.
Otherwise, by backend:

- ``scripted``: no compute at all.
- ``embedded``: 150 tokens/s, SmolLM2-135M under llama.cpp on this project's 2-core
  machines (measured, ../shared/DESIGN.md); the hours are CPU-hours.
- ``openai`` without ``base_url``: a hosted API, billed per token, no GPU of ours.
- ``openai`` with a ``base_url`` (a vLLM server) and ``vllm``: by the parameter count read
  from the model id ("27b", "32B", "72B"), interpolated log-log between the per-GPU output
  throughputs Lambda measured with vLLM 0.5.4 on H100-80GB SXM, ShareGPT prompts, 320 in
  flight (github.com/LambdaLabsML/vllm-benchmark, benchmark_v0.md, September 2024):
  Llama-3.1-8B-FP8 on 1 GPU 3,400 tokens/s; Mistral-Nemo-12B on 1 GPU 2,415; Llama-3.1-
  70B-FP8 on 2 GPUs 1,728 (864 per GPU); Mistral-Large-123B on 4 GPUs 1,301 (325 per GPU).
  Below 8B the 8B figure is kept; above 123B throughput falls as 1/size. These are
  *output* token rates applied to all tokens: prompt tokens are processed in parallel
  during prefill and cost less each, so for prompt-heavy curation requests the GPU-hours
  are an upper bound. A model whose size cannot be read needs ``tokens_per_second``.

Prices (``price_input_per_mtok`` / ``price_output_per_mtok``, USD per 1M tokens): a price
left unset is 0 for a model that runs here (scripted, embedded, vLLM, an OpenAI-compatible
server on this machine's loopback: it costs GPU-hours, not money) and unknown for any other
``openai`` model, without ``base_url`` or with one elsewhere (a hosted API billed per token
looks no different from a vLLM server of our own: a server of one's own says so with
prices of 0): the plan says "price not set: cost unknown", never 0, and ``--max-cost``
refuses to run it.

Text encoders embedding a knowledge base (pages per second; a page is cut at the encoder's
window, 256 word pieces for MiniLM, 77 tokens for CLIP text towers). ``retrieval.
encoder_pages_per_second`` wins when set. Otherwise:

- ``minilm``: 20 pages/s, all-MiniLM-L6-v2 under sentence-transformers on this project's 2-core
  machines: 0.09 CPU-seconds per 250-token page (measured with ``time.process_time`` over 128
  Wikipedia-text pages of 245 word pieces, batch 32, torch on 2 threads); the hours are CPU-hours.
- ``open_clip``: no default (the rate depends on the architecture and the device): set it.
"""

from __future__ import annotations

import math
import re
from ipaddress import ip_address
from urllib.parse import urlsplit

from mmcurate.benchmarks.deflectionbench import RetrievalConfig
from mmcurate.core.config import ModelSpec
from mmcurate.core.specs import MiniLM

# (parameters in billions, output tokens/s per H100): Lambda, vLLM 0.5.4, September 2024
H100_ANCHORS = ((8.0, 3400.4), (12.0, 2414.8), (70.0, 863.8), (123.0, 325.3))
EMBEDDED_TOKENS_PER_SECOND = 150.0
MINILM_CPU_PAGES_PER_SECOND = 20.0  # 2 cores / 0.09 CPU-seconds per 250-token page, measured here
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def parameters_b(spec: ModelSpec) -> float | None:
    """The parameter count in billions named in the model id (or the name), e.g. 32 for
    ``Qwen/Qwen2.5-VL-32B-Instruct``; None when none is named."""
    for text in (spec.model, spec.name):
        found = _SIZE.search(text or "")
        if found:
            return float(found.group(1))
    return None


def by_size(billions: float) -> float:
    """Output tokens/s per H100 for a model of ``billions`` parameters (log-log interpolation)."""
    (low, low_rate), (high, high_rate) = H100_ANCHORS[0], H100_ANCHORS[-1]
    if billions <= low:
        return low_rate
    if billions >= high:
        return high_rate * high / billions
    for (a, rate_a), (b, rate_b) in zip(H100_ANCHORS, H100_ANCHORS[1:]):
        if a <= billions <= b:
            slope = math.log(rate_b / rate_a) / math.log(b / a)
            return rate_a * (billions / a) ** slope
    raise AssertionError("unreachable: anchors cover the range")


def throughput(spec: ModelSpec) -> tuple[float | None, str]:
    """(tokens per second per GPU, or None when nothing runs locally; where the figure comes from)."""
    if spec.tokens_per_second is not None:
        return spec.tokens_per_second, "config"
    if spec.backend == "scripted":
        return None, "scripted: no compute"
    if spec.backend == "embedded":
        return EMBEDDED_TOKENS_PER_SECOND, "embedded llama.cpp on 2 CPU cores (CPU-hours)"
    if spec.backend == "openai" and spec.base_url is None:
        return None, "hosted API: billed per token"
    size = parameters_b(spec)
    if size is None:
        return None, "size unknown: set tokens_per_second"
    return by_size(size), f"{size:g}B on H100 (Lambda vLLM benchmark, 2024-09)"


def hours(tokens: float, spec: ModelSpec) -> float | None:
    """Device-hours to process ``tokens`` prompt plus completion tokens, or None (nothing local)."""
    rate, _ = throughput(spec)
    return None if rate is None else tokens / rate / 3600


def billed(spec: ModelSpec) -> bool:
    """Whether the model may be billed per token (its cost needs its prices): an ``openai``
    model not served on this machine's loopback."""
    return spec.backend == "openai" and not loopback(spec.base_url)


def loopback(url: str | None) -> bool:
    """Whether ``url`` names a server on this machine (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(url).hostname if url else None
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def cost(prompt_tokens: float, completion_tokens: float, spec: ModelSpec) -> float | None:
    """USD at the spec's per-1M-token prices; None when a billed model's price is not set."""
    prices = (spec.price_input_per_mtok, spec.price_output_per_mtok)
    if None in prices and billed(spec):
        return None
    price_in, price_out = (p or 0.0 for p in prices)
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1e6


def encoder_throughput(cfg: RetrievalConfig) -> tuple[float | None, str]:
    """(KB pages the text encoder embeds per second, or None when unknown; where the figure comes from)."""
    if cfg.encoder_pages_per_second is not None:
        return cfg.encoder_pages_per_second, "config"
    if isinstance(cfg.text_encoder, MiniLM):
        return MINILM_CPU_PAGES_PER_SECOND, "all-MiniLM-L6-v2 on 2 CPU cores, 250-token pages (measured; CPU-hours)"
    return None, "unknown: set retrieval.encoder_pages_per_second"
