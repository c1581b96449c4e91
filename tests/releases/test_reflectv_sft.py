"""ReflectV's training export: conversation records fine-tuning tools read, loaded back."""

from __future__ import annotations

import json

from datasets import load_dataset

from mmcurate.annotation.reflectv.turns import render_turn, tool_call
from mmcurate.releases.reflectv.sft import IMAGE_TAG, read_records, record_defects
from mmcurate.releases.verify import verify_release
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b
from tests.releases.test_reflectv_validation import THINK, _draft


def _release(tmp_path):
    store, shas = b.make_store(tmp_path / "images")
    good = render_turn("a dog", THINK, tool_call(True, "long whiskers", "red", "point"))
    return write_release(_draft(shas, good), tmp_path / "releases", store), shas


def test_export_loads_back_with_datasets(tmp_path) -> None:
    path, shas = _release(tmp_path)
    assert verify_release(path).ok  # the export is sealed with the release
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["exports"]["sft"]["records"] == 3 and "sft/conversations.jsonl" in manifest["files"]
    ds = load_dataset("json", data_files=str(path / "sft" / "conversations.jsonl"), split="train")
    assert ds.num_rows == 3  # one record per trajectory
    for record in ds:
        roles = [m["role"] for m in record["messages"]]
        assert roles == ["system", "user", "assistant", "user", "assistant"]
        parts = [p for m in record["messages"] for p in m["content"] if p["type"] == "image"]
        assert [p["image"] for p in parts] == record["images"] and len(record["images"]) == 2
        assert all((path / "sft" / image).is_file() for image in record["images"])
        assistant = [m["content"][0]["text"] for m in record["messages"] if m["role"] == "assistant"]
        assert (
            assistant[0].startswith("<answer>a dog</answer><think>")
            and "What animal is shown?" in record["messages"][1]["content"][1]["text"]
        )
    # the second user turn shows the marked image the first turn's tool call produced
    images = sorted((path / "sft" / "images").iterdir())
    assert {p.stem for p in images} == set(shas[:2])


def test_llamafactory_layout(tmp_path) -> None:
    path, _ = _release(tmp_path)
    info = json.loads((path / "sft" / "dataset_info.json").read_text())
    assert info["reflectv"]["formatting"] == "sharegpt" and info["reflectv"]["file_name"] == "sharegpt.jsonl"
    records = read_records(path, "sharegpt.jsonl")
    assert len(records) == 3
    for record in records:
        assert [m["role"] for m in record["messages"]] == ["user", "assistant"] * 2
        assert sum(m["content"].count(IMAGE_TAG) for m in record["messages"]) == len(record["images"]) == 2
        assert record["messages"][0]["content"].startswith(IMAGE_TAG) and record["system"]
        assert record_defects(record, path / "sft", sharegpt_layout=True) == []


def test_defects_are_named(tmp_path) -> None:
    path, _ = _release(tmp_path)
    [record, *_] = read_records(path)
    swapped = dict(
        record, messages=[record["messages"][0], record["messages"][2], record["messages"][1], *record["messages"][3:]]
    )
    assert "roles do not alternate user/assistant" in record_defects(swapped, path / "sft")
    missing = dict(record, images=[*record["images"][:1], "images/nowhere.png"])
    assert "an image file is missing" in record_defects(missing, path / "sft")
