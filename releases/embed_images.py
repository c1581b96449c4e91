"""Replace image hashes by the image bytes, so every shard is self-contained.

Any field named ``image`` (string sha256) or ``images`` (list of sha256), at the top level
or nested in structs and lists of structs (e.g. ``gold_contexts``), becomes a Hugging Face
Image struct ``{bytes: binary, path: "<sha256>.<ext>"}``. The matching ``datasets``
features (with ``Image()`` in those places) are derived from the resulting schema and
stored in the Parquet metadata and the dataset card, so ``datasets`` decodes PIL images.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from datasets import Features, Image, List
from datasets.features.features import generate_from_arrow_type

from mmcurate.core.images import ImageStore

from .errors import ReleaseError

IMAGE_STRUCT = pa.struct([pa.field("bytes", pa.binary()), pa.field("path", pa.string())])
IMAGE_FIELDS = ("image", "images")


def _is_image_hash_field(name: str, type_: pa.DataType) -> bool:
    if name == "image":
        return pa.types.is_string(type_) or pa.types.is_large_string(type_)
    if name == "images":
        return pa.types.is_list(type_) and pa.types.is_string(type_.value_type)
    return False


def _image_structs(hashes: pa.Array, load: Callable[[str], tuple[bytes, str]]) -> pa.StructArray:
    data: list[bytes | None] = []
    paths: list[str | None] = []
    for sha in hashes.to_pylist():
        if sha is None:
            data.append(None)
            paths.append(None)
        else:
            blob, name = load(sha)
            data.append(blob)
            paths.append(name)
    return pa.StructArray.from_arrays(
        [pa.array(data, pa.binary()), pa.array(paths, pa.string())],
        fields=list(IMAGE_STRUCT),
        mask=hashes.is_null(),
    )


def _embed(array: pa.Array, name: str, load: Callable[[str], tuple[bytes, str]]) -> pa.Array:
    type_ = array.type
    if _is_image_hash_field(name, type_):
        if name == "image":
            return _image_structs(array, load)
        return pa.ListArray.from_arrays(array.offsets, _image_structs(array.values, load), mask=array.is_null())
    if pa.types.is_struct(type_):
        children = [_embed(array.field(i), type_.field(i).name, load) for i in range(type_.num_fields)]
        fields = [pa.field(type_.field(i).name, c.type, type_.field(i).nullable) for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null())
    if pa.types.is_list(type_):
        values = _embed(array.values, type_.value_field.name, load)
        if values is array.values:
            return array
        return pa.ListArray.from_arrays(array.offsets, values, mask=array.is_null())
    return array


def _has_image_fields(name: str, type_: pa.DataType) -> bool:
    if _is_image_hash_field(name, type_):
        return True
    if pa.types.is_struct(type_):
        return any(_has_image_fields(f.name, f.type) for f in type_)
    if pa.types.is_list(type_):
        return _has_image_fields(type_.value_field.name, type_.value_type)
    return False


def store_loader(store: ImageStore) -> Callable[[str], tuple[bytes, str]]:
    """Read an image from the store; a missing image is a broken release, not a skip."""

    def load(sha: str) -> tuple[bytes, str]:
        path = store.find(sha)
        if path is None:
            raise ReleaseError(f"image {sha} is referenced by the release but missing from the store {store.root}")
        return path.read_bytes(), path.name

    return load


def embed_images(table: pa.Table, store: ImageStore) -> pa.Table:
    """Return ``table`` with every image hash field replaced by an Image struct."""
    load = store_loader(store)
    columns = []
    for field in table.schema:
        column = table.column(field.name)
        if _has_image_fields(field.name, field.type):
            column = _embed(column.combine_chunks(), field.name, load)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _feature(name: str, type_: pa.DataType) -> Any:  # a datasets feature
    if name in IMAGE_FIELDS and type_ == IMAGE_STRUCT:
        return Image()
    if name == "images" and pa.types.is_list(type_) and type_.value_type == IMAGE_STRUCT:
        return List(Image())
    if pa.types.is_struct(type_):
        return {f.name: _feature(f.name, f.type) for f in type_}
    if pa.types.is_list(type_):
        return List(_feature(type_.value_field.name, type_.value_type))
    return generate_from_arrow_type(type_)


def hf_features(schema: pa.Schema) -> Features:
    """The ``datasets`` features of an embedded table: Image wherever an image was embedded."""
    return Features({field.name: _feature(field.name, field.type) for field in schema})


def with_hf_metadata(table: pa.Table) -> pa.Table:
    """Cast to the features' Arrow schema and store the features under the ``huggingface`` key.

    ``datasets`` only trusts stored features for fields equal to its own schema (all
    nullable), so the cast is what makes nested images decode.
    """
    features = hf_features(table.schema)
    metadata = {b"huggingface": json.dumps({"info": {"features": features.to_dict()}}).encode()}
    return table.cast(features.arrow_schema).replace_schema_metadata(metadata)
