"""Session-wide test setup: offline model loading, bundled fixtures, one Prefect harness."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


@pytest.fixture(scope="session")
def fixtures_root(tmp_path_factory) -> Path:
    """The bundled fixtures (built by `make fixtures`), or a fresh build when absent."""
    built = REPO / "tests" / "fixtures" / "generated"
    if (built / ".done").exists():
        return built
    out = tmp_path_factory.mktemp("fixtures")
    spec = importlib.util.spec_from_file_location("make_fixtures", REPO / "tests" / "fixtures" / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(out)
    return out


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect API for flow runs in this session (real flow and task runs)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield
