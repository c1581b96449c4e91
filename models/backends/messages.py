"""Turn mmcurate messages into the OpenAI chat shape both HTTP servers and vLLM accept.

Image parts ``{"type": "image", "sha256": h}`` become ``image_url`` parts carrying a
base64 data URL read from the ImageStore, an image longer than ``max_side`` on either side
downscaled to it first (aspect kept; ``ModelSpec.image_max_side``). For a model without
vision they are dropped and counted; a message left with text parts only is sent as a plain
string, which text-only chat templates expect.
"""

from __future__ import annotations

import base64
import io

from PIL import Image

from mmcurate.core.images import ImageStore
from mmcurate.models.backends.base import RequestError

MIME = {
    "jpg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "gif": "image/gif",
    "bmp": "image/bmp",
    "tif": "image/tiff",
}


def data_url(images: ImageStore, sha: str, max_side: int | None = None) -> str:
    try:
        path = images.path(sha)
    except KeyError as exc:
        raise RequestError(str(exc).strip("'\"")) from None
    data, ext = path.read_bytes(), path.suffix.lstrip(".")
    if max_side is not None:
        data, ext = downscaled(data, ext, max_side)
    mime = MIME.get(ext, "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def downscaled(data: bytes, ext: str, max_side: int) -> tuple[bytes, str]:
    """(bytes, extension) of the image with its longest side at most ``max_side``, aspect kept:
    unchanged when it already fits; a JPEG stays a JPEG, anything else becomes a PNG."""
    with Image.open(io.BytesIO(data)) as img:
        if max(img.size) <= max_side:
            return data, ext
        img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        jpeg = ext == "jpg"
        out = io.BytesIO()
        (img.convert("RGB") if jpeg and img.mode != "RGB" else img).save(
            out, format="JPEG" if jpeg else "PNG", **({"quality": 95} if jpeg else {})
        )
    return out.getvalue(), "jpg" if jpeg else "png"


def to_openai_messages(
    messages: list[dict], images: ImageStore | None, vision: bool, max_side: int | None = None
) -> tuple[list[dict], int]:
    """Return (messages in OpenAI chat form, number of image parts dropped); ``max_side``: the
    longest image side sent (``data_url``)."""
    out: list[dict] = []
    dropped = 0
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            out.append(dict(message))
            continue
        parts: list[dict] = []
        for part in content:
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                if not vision:
                    dropped += 1
                    continue
                if images is None:
                    raise RequestError("request has image parts but no image store was given")
                parts.append({"type": "image_url", "image_url": {"url": data_url(images, part["sha256"], max_side)}})
            else:
                raise RequestError(f"unknown message part type {kind!r}")
        text = text_content(parts)
        out.append({**message, "content": parts if text is None else text})
    return out, dropped


def text_content(parts: list[dict]) -> str | None:
    """OpenAI content parts that are all text, as the one string a text-only chat template
    expects (the parts' texts, a line each); None when a part is not text."""
    if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in parts):
        return None
    return "\n".join(p["text"] for p in parts)
