"""A model's API key from a Prefect Secret block (``api_key_block``), under the Prefect test
harness: the flow's shard tasks read the block and the key reaches the model server only; a
block that does not exist is a one-line configuration error."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.releases.reader import open_release
from tests.flows import flowkit

pytestmark = pytest.mark.slow


def test_a_secret_block_reaches_the_model_server_and_nothing_else(tmp_path, fixtures_root, prefect_harness):
    from prefect.blocks.system import Secret

    from mmcurate.flows.deflectionbench.curate import deflectionbench

    key = f"sk-block-{secrets.token_hex(12)}"
    Secret(value=key).save("mmcurate-test-model-key", overwrite=True)
    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", flowkit.READER["default"]) as stub:
        config = flowkit.scripted_config(
            tmp_path,
            fixtures_root,
            models={"vlm-reader": flowkit.stub_spec(stub, api_key_block="mmcurate-test-model-key")},
        )
        release = Path(deflectionbench(config=str(config)))
    assert stub.authorizations == {f"Bearer {key}"}
    assert open_release(release).sample_ids
    assert [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()] == []


def test_a_missing_secret_block_is_a_config_error(tmp_path, fixtures_root, prefect_harness):
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    with flowkit.StubModel(flowkit.DRYRUN / "vlm-reader.jsonl", flowkit.READER["default"]) as stub:
        config = flowkit.scripted_config(
            tmp_path, fixtures_root, models={"vlm-reader": flowkit.stub_spec(stub, api_key_block="no-such-block")}
        )
        with pytest.raises(ConfigError, match="model vlm-reader: secret block 'no-such-block' not found"):
            deflectionbench(config=str(config))
    assert stub.snapshot() == {}  # nothing was sent without its key
