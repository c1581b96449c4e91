"""kill -9 mid-batch, rerun: no finished call is repeated; the rest are made once more.

No timing window: the fault server answers ``ADMIT`` requests and holds the rest; the test
waits (generously) until a request is held and the answers before it are cached, then kills
the child. Exactly ``ADMIT`` calls were finished.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from mmcurate.core.config import ModelSpec
from mmcurate.models.cache import ResponseCache, cache_key
from mmcurate.models.client import ModelClient, make_backend
from mmcurate.models.requests import ChatRequest

N = 16
ADMIT = 4
PATIENCE = 300.0
RUN_BATCH = """
import json, sys
from mmcurate.core.config import ModelSpec
from mmcurate.models.accounting import CallCounter
from mmcurate.models.cache import ResponseCache
from mmcurate.models.client import ModelClient, make_backend
from mmcurate.models.requests import ChatRequest
spec = ModelSpec(**json.loads(sys.argv[1]))
requests = [ChatRequest(f"k{i}", [{"role": "user", "content": f"id=k{i} fault=ok"}], "crash.v1") for i in range(int(sys.argv[3]))]
client = ModelClient(spec, make_backend(spec, None), ResponseCache.open(sys.argv[2]), CallCounter())
client.chat(requests, "crash")
"""


def requests() -> list[ChatRequest]:
    return [ChatRequest(f"k{i}", [{"role": "user", "content": f"id=k{i} fault=ok"}], "crash.v1") for i in range(N)]


def test_rerun_after_kill9_repeats_no_finished_call(fault_server, tmp_path, counter):
    fault_server.admit_left = ADMIT
    fields = dict(name="slow", backend="openai", model="m", base_url=fault_server.base_url, concurrency=2, timeout=600)
    spec = ModelSpec(**fields)
    url = f"sqlite:///{tmp_path / 'responses.sqlite'}"
    cache = ResponseCache.open(url)
    keys = {r.key: cache_key(spec, r) for r in requests()}

    child = subprocess.Popen([sys.executable, "-c", RUN_BATCH, json.dumps(fields), url, str(N)])
    deadline = time.monotonic() + PATIENCE
    while not (fault_server.arrived.is_set() and cache.count() == ADMIT) and child.poll() is None:
        assert time.monotonic() < deadline, "gave up waiting for the held request"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL

    finished = {k for k, ck in keys.items() if cache.get_many([ck])}
    assert len(finished) == ADMIT  # killed mid-batch, with exactly the admitted answers cached
    fault_server.admit_left = None
    client = ModelClient(spec, make_backend(spec, None), cache, counter)
    try:
        answers = client.chat(requests(), "crash")
    finally:
        client.close()
    assert all(a.text == f"answer {a.key}" for a in answers)
    hits = fault_server.hits()
    assert all(hits[k] == 1 for k in finished)  # never asked again
    assert {a.key for a in answers if a.cached} == finished
    assert counter.totals == {"calls": N - len(finished), "cache_hits": len(finished), "failures": 0}
    cache.close()
