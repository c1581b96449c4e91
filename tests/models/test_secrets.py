"""An API key from the environment is sent to the server and nowhere else."""

from __future__ import annotations

import logging

import pytest

from mmcurate.core.config import Settings
from mmcurate.core.errors import ConfigError
from mmcurate.models.client import ModelPool
from mmcurate.models.requests import ChatRequest

SECRET = "sk-test-SECRET-d41d8cd98f00b204"


def test_api_key_never_reaches_logs_cache_or_errors(
    fault_server, fault_spec, cache, counter, monkeypatch, caplog, tmp_path
):
    monkeypatch.setenv("MMCURATE_TEST_API_KEY", SECRET)
    spec = fault_spec(name="keyed", api_key_env="MMCURATE_TEST_API_KEY", max_retries=1)
    caplog.set_level(logging.DEBUG)
    batch = [
        ChatRequest(k, [{"role": "user", "content": f"id={k} fault={k}"}], "t") for k in ("ok", "401", "always500")
    ]
    with ModelPool(Settings(models={"keyed": spec}), cache, None, counter) as pool:
        responses = pool.client("keyed").chat(batch, "s")
    assert all(h["Authorization"] == f"Bearer {SECRET}" for _, _, h in fault_server.received)
    assert responses[0].text == "answer ok"
    assert "***" in responses[1].error  # the server echoed the key; we scrubbed it
    for response in responses:
        assert SECRET not in repr(response)
    assert caplog.records and SECRET not in caplog.text
    cache.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("responses.sqlite*"))
    assert b"answer ok" in stored and SECRET.encode() not in stored


def test_missing_key_variable_is_a_config_error(fault_spec, cache, counter, monkeypatch):
    monkeypatch.delenv("MMCURATE_UNSET_KEY", raising=False)
    spec = fault_spec(name="keyed", api_key_env="MMCURATE_UNSET_KEY")
    with ModelPool(Settings(models={"keyed": spec}), cache, None, counter) as pool:
        with pytest.raises(ConfigError, match="MMCURATE_UNSET_KEY is not set"):
            pool.client("keyed")
