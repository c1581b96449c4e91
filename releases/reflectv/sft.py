"""ReflectV's training export: the released trajectories as conversation records that
fine-tuning tools read as they are (MIRROR fine-tunes Qwen2.5-VL on ReflectV with
LLaMA-Factory, seed paper 002 appendix B.1; eq. 3 is a multi-turn loss over every turn).

Written into the release under ``sft/`` before it is sealed (so ``mmcurate verify`` checks it):

- ``sft/images/<sha256>.<ext>``: every image a conversation shows, once.
- ``sft/conversations.jsonl``: one record per trajectory, ``{"id", "format", "messages",
  "images"}``. ``messages`` alternate user / assistant after one system message; a message's
  ``content`` is a list of typed parts, ``{"type": "image", "image": "images/<file>"}`` and
  ``{"type": "text", "text": ...}``: the multimodal chat layout of Hugging Face processors'
  chat templates (huggingface.co/docs/transformers/chat_templating_multimodal: content as a
  list of parts with a ``type`` key) and of TRL's vision SFT datasets, which take the images in
  message order from an ``images`` column (huggingface.co/datasets/HuggingFaceH4/llava-instruct-mix-vsft).
- ``sft/sharegpt.jsonl`` and ``sft/dataset_info.json``: the same records in LLaMA-Factory's
  multimodal sharegpt layout: ``content`` a string with one ``<image>`` tag where each image
  goes, ``images`` the paths in tag order (their numbers must match), the system prompt in
  ``system`` (github.com/hiyouga/LLaMA-Factory ``data/mllm_demo.json`` and ``data/README.md``);
  ``dataset_info.json`` registers it as ``reflectv`` (``formatting: sharegpt``), so
  ``dataset_dir: <release>/sft`` and ``dataset: reflectv`` train on it.

Image paths are relative to ``sft/`` (LLaMA-Factory's dataset and media folder).

A conversation: the system message states the output protocol (MIRROR's Figure 13, in our
words); the first user message shows the original image with the question and the format
reminder (Figure 14); assistant message k is turn k's ``<answer>/<think>/<tool_call>``; the
user message after it shows the image the tool call produced (turn k's marks, I_k = G(I_0,
v_k)). A QA pair is one user and one assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from mmcurate.core.images import ImageStore
from mmcurate.core.visual_prompts import COLORS, MARK_TYPES, TOOL_NAME

SFT_DIR = "sft"
CONVERSATIONS = "conversations.jsonl"
SHAREGPT = "sharegpt.jsonl"
DATASET_INFO = "dataset_info.json"
DATASET_NAME = "reflectv"
IMAGE_TAG = "<image>"
SYSTEM = (
    "You answer questions about images and check your own answers against the image. Write exactly "
    "three parts, in this order: <answer>your answer</answer>, then <think>a critique of that answer: "
    "is it grounded in the image, what did you miss; name the region you need to look at again, with "
    "the colour and the kind of mark that should show it</think>, then <tool_call>a JSON call of "
    f"{TOOL_NAME} with the arguments flag (true when the answer needs checking or correcting, false "
    "only when it is right and verified), anchor (the region as your think names it), color (one of "
    f"{', '.join(COLORS)}) and mark_type (one of {', '.join(MARK_TYPES)}); with flag false the other "
    'three are "None"</tool_call>. After a call with flag true you are shown the image with the '
    "marks drawn; look again and answer anew."
)
USER_FORMAT = (
    "Answer first, then think, then call the tool: <answer>...</answer><think>...</think><tool_call>...</tool_call>"
)
MARKED = "The image with the marks your tool call asked for."


def _image_name(store: ImageStore, sha: str, folder: Path) -> str:
    """The image's file under ``folder`` (written once), as a path relative to ``sft/``."""
    source = store.find(sha)
    if source is None:
        raise FileNotFoundError(f"image {sha} of a trajectory is missing from the store {store.root}")
    target = folder / source.name
    if not target.exists():
        target.write_bytes(source.read_bytes())
    return f"images/{source.name}"


def conversation(row: Mapping[str, Any], images: list[str]) -> list[dict[str, Any]]:
    """The chat messages of one released trajectory (see the module docstring); ``images``
    are the paths of the images its turns see, in order."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": SYSTEM}]}]
    for k, (turn, image) in enumerate(zip(row["conversation"], images)):
        text = f"{row['question']}\n{USER_FORMAT}" if k == 0 else MARKED
        messages.append(
            {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": text}]}
        )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": turn["text"]}]})
    return messages


def sharegpt(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """(system, messages) in LLaMA-Factory's layout: content strings, an ``<image>`` tag for each image."""

    def flat(parts: list[dict[str, Any]]) -> str:
        return "".join(IMAGE_TAG if p["type"] == "image" else p["text"] for p in parts)

    system = flat(messages[0]["content"])
    return system, [{"role": m["role"], "content": flat(m["content"])} for m in messages[1:]]


def write_sft(tables: Mapping[str, pa.Table], folder: Path, store: ImageStore) -> dict[str, Any]:
    """Write the export into the release ``folder``; return the manifest's record of it."""
    out = folder / SFT_DIR
    (out / "images").mkdir(parents=True)
    parts, shared = [], []
    for row in tables["trajectories"].to_pylist():
        images = [_image_name(store, turn["image"], out / "images") for turn in row["conversation"]]
        messages = conversation(row, images)
        parts.append({"id": row["sample_id"], "format": row["format"], "messages": messages, "images": images})
        system, flat = sharegpt(messages)
        shared.append({"id": row["sample_id"], "system": system, "messages": flat, "images": images})
    for name, records in ((CONVERSATIONS, parts), (SHAREGPT, shared)):
        (out / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    info = {
        DATASET_NAME: {
            "file_name": SHAREGPT,
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images", "system": "system"},
            "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
        }
    }
    (out / DATASET_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return {
        "sft": {
            "records": len(parts),
            "images": len(list((out / "images").iterdir())),
            "conversations": f"{SFT_DIR}/{CONVERSATIONS}",
            "sharegpt": f"{SFT_DIR}/{SHAREGPT}",
            "dataset_info": f"{SFT_DIR}/{DATASET_INFO}",
            "layout": "messages with typed image/text parts (HF chat templates, TRL); LLaMA-Factory "
            "sharegpt with <image> tags; image paths relative to sft/",
        }
    }


def read_records(release: Path | str, name: str = CONVERSATIONS) -> list[dict[str, Any]]:
    """The records of one export file of a release."""
    path = Path(release) / SFT_DIR / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def record_defects(record: dict[str, Any], folder: Path, sharegpt_layout: bool = False) -> list[str]:
    """What is wrong with one export record: roles that do not alternate, an image that is not a
    file under ``folder`` (``sft/``), images out of step with the conversation's image parts or tags."""
    problems = []
    messages = record["messages"]
    roles = [m["role"] for m in messages]
    expected = ["user", "assistant"] * (len(roles) // 2)
    if (roles if sharegpt_layout else roles[1:]) != expected or not expected:
        problems.append("roles do not alternate user/assistant")
    if sharegpt_layout:
        shown = sum(m["content"].count(IMAGE_TAG) for m in messages)
    else:
        shown = [p["image"] for m in messages for p in m["content"] if p["type"] == "image"]
        if shown != record["images"]:
            problems.append("image parts differ from images")
        shown = len(shown)
    if shown != len(record["images"]):
        problems.append("images do not match the conversation's images")
    if not all((folder / image).is_file() for image in record["images"]):
        problems.append("an image file is missing")
    return problems
