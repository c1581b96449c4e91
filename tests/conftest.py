"""Session-wide test setup: offline model loading, bundled fixtures, one Prefect harness, and
a scripted model world for stage tests.

``world.add(name, rules, default)`` writes a scripted model's JSONL rules; ``world.pool``
records every request key each model was sent (``world.sent[model]`` -> [(stage, key)]);
``world.ctx()`` is a stage context over that pool and the config's judge.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.model_servers", "tests.s3_server"]  # model servers and the local S3 server, for every folder
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

import pyarrow as pa  # noqa: E402  (the environment above must be set before these imports)
import pytest  # noqa: E402

from mmcurate.core.config import ModelSpec, Settings  # noqa: E402
from mmcurate.core.images import ImageStore  # noqa: E402
from mmcurate.core.records import Context, Sample  # noqa: E402
from mmcurate.core.schema import SAMPLE  # noqa: E402
from mmcurate.core.stages import StageContext  # noqa: E402
from mmcurate.judging.session import Models  # noqa: E402
from mmcurate.judging.simpleqa import make_judge  # noqa: E402
from mmcurate.models.accounting import CallCounter  # noqa: E402
from mmcurate.models.cache import ResponseCache  # noqa: E402
from mmcurate.models.client import ModelPool  # noqa: E402


@pytest.fixture(scope="session")
def fixtures_root(tmp_path_factory) -> Path:
    """The bundled fixtures (built by `make fixtures`), or a fresh build when absent."""
    built = REPO / "tests" / "fixtures" / "generated"
    if (built / ".done").exists():
        return built
    out = tmp_path_factory.mktemp("fixtures")
    from tests.fixtures.make_fixtures import main

    main(out)
    return out


@pytest.fixture(scope="session")
def dryrun_config(fixtures_root):
    """Writes the dry run's config (configs/dryrun.yaml) into a folder, its scripts, sources and
    KB pointed at this checkout and the bundled fixtures; returns the config's path."""
    from tests.dryrun import dryrun_config as write

    return lambda home: write(home, fixtures_root)


@pytest.fixture(scope="session")
def prefect_harness():
    """A temporary Prefect API for flow runs in this session (real flow and task runs)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


# where a command without --config wrote before issue 42 item 4: the bundled demo.yaml's
# workdir and releases root, which are the checkout's (`make demo` fills them)
CHECKOUT_OUTPUTS = (REPO / ".mmcurate", REPO / "releases_out")


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Everything under ``folder`` with its size and modification time (empty when absent)."""
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(folder)): (stat.st_size, stat.st_mtime_ns)
        for path in folder.rglob("*")
        for stat in [path.lstat()]
    }


@pytest.fixture(scope="session", autouse=True)
def checkout_unchanged() -> Iterator[None]:
    """The suite writes only under tmp_path: the checkout's workdir and releases folder are as
    they were when it ends (issue 42 item 4), else the session errors naming what changed."""
    before = {folder: _listing(folder) for folder in CHECKOUT_OUTPUTS}
    yield
    changes = []
    for folder, was in before.items():
        now = _listing(folder)
        for what, names in (
            ("added", now.keys() - was.keys()),
            ("removed", was.keys() - now.keys()),
            ("changed", {n for n in now.keys() & was.keys() if now[n] != was[n]}),
        ):
            if names:
                changes.append(f"{folder}: {what} {len(names)}, e.g. {', '.join(sorted(names)[:3])}")
    assert not changes, "the tests wrote into the checkout: " + "; ".join(changes)


class SpyPool(ModelPool):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sent: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.messages: dict[str, list[list[dict]]] = defaultdict(list)

    def client(self, name: str):  # type: ignore[override]
        client = super().client(name)
        if not getattr(client, "_spied", False):
            real = client.chat

            def chat(requests, stage, _real=real, _name=name):
                self.sent[_name].extend((stage, r.key) for r in requests)
                self.messages[_name].extend(r.messages for r in requests)
                return _real(requests, stage)

            client.chat = chat  # type: ignore[method-assign]
            client._spied = True  # type: ignore[attr-defined]
        return client


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.specs: dict[str, ModelSpec] = {}
        self.cache = ResponseCache.open(f"sqlite:///{root / 'responses.sqlite'}")
        self.counter = CallCounter()
        self._pool: SpyPool | None = None

    def add(self, name: str, rules: list[dict], default: str | None = "Berlin") -> str:
        script = self.root / f"{name}.jsonl"
        script.write_text("".join(json.dumps(r) + "\n" for r in rules))
        self.specs[name] = ModelSpec(name=name, backend="scripted", script=script, default=default)
        self._pool = None
        return name

    @property
    def pool(self) -> SpyPool:
        if self._pool is None:
            settings = Settings(workdir=self.root, models=self.specs)
            self._pool = SpyPool(settings, self.cache, None, self.counter)
            self.judge = make_judge(settings, self._pool)
        return self._pool

    @property
    def sent(self) -> dict[str, list[tuple[str, str]]]:
        return self.pool.sent

    def ctx(self, run_id: str = "r", store: ImageStore | None = None) -> StageContext:
        """A stage context over this world's pool and judge (images in ``store``)."""
        pool = self.pool
        settings = pool.settings
        return StageContext(
            settings, run_id, store or ImageStore(self.root / "images"), Models(pool, self.judge, self.counter)
        )

    def calls(self, stage: str, model: str) -> int:
        return sum(
            r["calls"] + r["cache_hits"] for r in self.counter.rows() if r["stage"] == stage and r["model"] == model
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    if w._pool is not None:
        w._pool.close()
    w.cache.close()


def text(cid: str, body: str, title: str | None = None) -> Context:
    return Context(context_id=cid, modality="text", text=body, title=title)


def image(cid: str, sha: str, title: str | None = None) -> Context:
    return Context(context_id=cid, modality="image", image=sha, title=title)


def sample(
    source_id: str,
    question: str,
    answers: list[str],
    gold: list[Context] | None = None,
    negatives: list[Context] | None = None,
    source: str = "infoseek",
    images: list[str] | None = None,
    meta: dict | None = None,
) -> dict:
    return Sample(
        source=source,
        source_id=source_id,
        question=question,
        answers=answers,
        images=images if images is not None else ["ab" * 32],
        gold_contexts=gold
        if gold is not None
        else [text(f"{source_id}-g", f"GOLD-{source_id} says {answers[0] if answers else ''}", "Gold")],
        negative_contexts=negatives or [],
        meta=meta or {},
    ).to_row()


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SAMPLE)


@pytest.fixture
def make():
    """Builders for the tests: make.sample(...), make.table(rows), make.text(...), make.image(...)."""

    class Make:
        pass

    m = Make()
    m.sample, m.table, m.text, m.image = sample, table, text, image  # type: ignore[attr-defined]
    return m
