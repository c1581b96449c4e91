"""Catalogs of models a benchmark could be re-curated with (``mmcurate watch``).

Two kinds:

- a YAML file the maintainers keep in git: ``models:`` a list of model specs
  (``core.config.ModelSpec`` fields; each name once) with ``released: YYYY-MM-DD`` (YAML's
  date, or the same as a quoted string) and optionally ``role``
  (the re-curation role, e.g. ``teacher``; default: the benchmark's first) and ``note``.
  Relative paths (a scripted model's ``script``) resolve against the file's folder;
- any OpenAI-compatible server's model list, named by its root URL (``http://host:port/v1``):
  ``GET <root>/models`` answers ``{"object": "list", "data": [{"id": ..., ...}]}`` (the
  OpenAI API's "List models"; llama-cpp-python 0.3's server, ``llama_cpp/server/app.py``
  ``get_models``, answers ``{"id": <alias>, "object": "model", "owned_by": "me",
  "permissions": []}`` per model; vLLM adds ``created``, ``root`` and ``max_model_len``).
  Each id becomes an ``openai``-backend spec aimed at that server, named by the id (every
  run of characters a model name does not take written as ``_``: ``org/model`` is
  ``org_model``, ``core.config.safe_model_name``); the
  server says nothing about weights, so its revision is ``served:<root>``; ``created``
  (seconds since the epoch), when given, is its release date. A server that cannot be
  reached, or answers anything but that shape, is one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic import ValidationError

from mmcurate.core.config import ModelSpec, model_from_file_data, read_yaml, safe_model_name
from mmcurate.core.errors import ConfigError
from mmcurate.core.plural import listed

LIST_TIMEOUT = 10.0  # seconds to wait for a server's model list


@dataclass(frozen=True)
class CatalogModel:
    spec: ModelSpec
    released: date | None
    role: str | None  # re-curation role; None: the benchmark's default
    note: str = ""
    where: str = ""  # the entry, for messages: "catalog configs/catalog.yaml: models[2] (knower)"


def is_server(catalog: str) -> bool:
    return catalog.startswith(("http://", "https://"))


def read_catalog(catalog: str | Path) -> list[CatalogModel]:
    """The models of a catalog file or server (see the module docstring)."""
    text = str(catalog)
    return server_catalog(text) if is_server(text) else file_catalog(Path(text))


def file_catalog(path: Path) -> list[CatalogModel]:
    if not path.is_file():
        raise ConfigError(f"catalog {path}: no such file (a YAML catalog or http://host:port/v1)")
    data = read_yaml(path, "catalog")
    entries = data.get("models") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f"catalog {path}: expected 'models:' with a list of model specs")
    out = []
    for index, entry in enumerate(entries):
        where = f"catalog {path}: models[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: a model spec mapping is expected")
        fields = dict(entry)
        released, role, note = fields.pop("released", None), fields.pop("role", None), fields.pop("note", "")
        try:
            spec = model_from_file_data(fields, path.parent)
        except (TypeError, ValidationError) as exc:
            first = exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
            field = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"{where}{'.' + field if field else ''}: {first['msg']}") from None
        if role is not None and not isinstance(role, str):
            raise ConfigError(f"{where}.role: a role name is expected, got {role!r}")
        out.append(
            CatalogModel(spec, _date(released, f"{where}.released"), role, str(note or ""), f"{where} ({spec.name})")
        )
    return _unique(out, f"catalog {path}")


def _date(value: Any, where: str) -> date | None:
    """A release date: YAML's date, or the same written as a quoted string ("2026-11-01")."""
    if isinstance(value, datetime):
        return value.date()
    if value is None or isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{where}: a date YYYY-MM-DD is expected, got {value!r}")


def _unique(models: list[CatalogModel], where: str) -> list[CatalogModel]:
    """The models, refused when two share a name (a name is a model's id in ledgers and caches)."""
    names = [m.spec.name for m in models]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{where}: model names must be unique; listed more than once: {listed(twice)}")
    return models


def server_catalog(root: str) -> list[CatalogModel]:
    root = root.rstrip("/")
    try:
        response = httpx.get(f"{root}/models", timeout=LIST_TIMEOUT)
        response.raise_for_status()
        data = response.json()
    except httpx.HTTPStatusError as exc:
        raise ConfigError(f"catalog {root}: GET /models answered {exc.response.status_code}") from None
    except httpx.InvalidURL as exc:
        raise ConfigError(f"catalog {root}: not a server URL ({exc}); expected http://host:port/v1") from None
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"catalog {root}: the server cannot be reached ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'})"
        ) from None
    except json.JSONDecodeError:
        raise ConfigError(f"catalog {root}: GET /models did not answer JSON") from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("id"), str) for i in items):
        raise ConfigError(
            f"catalog {root}: GET /models did not answer an OpenAI model list "
            '({"object": "list", "data": [{"id": ...}]})'
        )
    return _unique(
        [
            CatalogModel(
                ModelSpec(
                    name=safe_model_name(item["id"]),
                    backend="openai",
                    model=item["id"],
                    base_url=root,
                    revision=f"served:{root}",
                ),
                _created(item),
                None,
                f"served by {root}" + (f", owned by {item['owned_by']}" if item.get("owned_by") else ""),
                f"catalog {root}: model {item['id']}",
            )
            for item in items
        ],
        f"catalog {root}",
    )


def _created(item: dict[str, Any]) -> date | None:
    created = item.get("created")
    return datetime.fromtimestamp(created, UTC).date() if isinstance(created, (int, float)) else None


def spec_file(model: CatalogModel, folder: Path) -> Path:
    """The model's spec as a YAML file in ``folder`` (what ``--add-model`` takes)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{model.spec.name}.yaml"  # a name is one safe path segment (core.config.MODEL_NAME)
    path.write_text(
        yaml.safe_dump(
            model.spec.model_dump(mode="json", exclude_defaults=True)
            | {"name": model.spec.name, "backend": model.spec.backend},
            sort_keys=False,
        )
    )
    return path
