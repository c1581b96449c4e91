"""The response cache of workers that share no disk (``cache_url: parts+<URL>``, issue 46 item 2).

Writers are separate processes (as cluster workers are); the parts folder is the only thing they
share. A reader in this process is made fresh by forgetting the process's merged copies.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mmcurate.cli.app import app
from mmcurate.core.config import load_config
from mmcurate.core.errors import ConfigError
from mmcurate.models import cache as cache_module
from mmcurate.models.cache import Compaction, PartsCache, ResponseCache, compact_parts

WRITE = """
import sys
from mmcurate.models.cache import ResponseCache
url, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache = ResponseCache.open(url)
for i in range(count):
    cache.put(f"{prefix}{i}", "m", "t.v1", f"answer {prefix}{i}", {"completion_tokens": i}, 0.5)
cache.close()
"""

# kill -9 while the part after the first ``count`` is half written: its bytes are on the store, its marker is not
WRITE_THEN_DIE = """
import os, signal, sys
from mmcurate.models import cache as cache_module
url, count = sys.argv[1], int(sys.argv[2])
cache = cache_module.ResponseCache.open(url)
for i in range(count):
    cache.put(f"k{i}", "m", "t.v1", f"answer k{i}", {}, 0.5)
fs = cache.parts.fs
def torn(path, data, **kwargs):
    with fs.open(path, "wb") as out:
        out.write(data[: len(data) // 2])
        out.flush()
        os.kill(os.getpid(), signal.SIGKILL)
fs.pipe_file = torn
cache.put("k-torn", "m", "t.v1", "never published", {}, 0.5)
"""


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):
    """Open a parts cache as a process that never read it would (no merged copy kept)."""

    def opened(url: str) -> ResponseCache:
        monkeypatch.setattr(cache_module, "_MERGED", {})
        return ResponseCache.open(url)

    return opened


def _write(url: str, prefix: str, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WRITE, url, prefix, str(count)])


def _published(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "markers").iterdir())


@pytest.mark.parametrize("store", ["file", "s3"])
def test_two_writer_processes_one_reader_sees_every_call(tmp_path, fresh, request, store):
    """Writers share only the store: a local folder, or the local S3 server (tests/s3_server.py)."""
    where = f"file://{tmp_path / 'cache'}" if store == "file" else f"{request.getfixturevalue('s3_bucket')}/cache"
    url = f"parts+{where}"
    writers = [_write(url, "a", 5), _write(url, "b", 7)]
    assert [w.wait() for w in writers] == [0, 0]
    reader = fresh(url)
    assert isinstance(reader, PartsCache)
    found = reader.get_many([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(7)] + ["c0"])
    assert sorted(found) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(7)])
    assert found["b3"].text == "answer b3" and found["b3"].usage == {"completion_tokens": 3}
    assert reader.count() == 12
    assert len(reader.parts.markers()) == 12  # one part per finished call, each with its marker
    assert compact_parts(where) == Compaction(12, 12, 12) and len(reader.parts.markers()) == 1
    assert fresh(url).get_many(list(found)) == found
    reader.close()


def test_reader_open_before_the_writers_sees_their_calls(tmp_path, fresh):
    url = f"parts+{tmp_path / 'cache'}"
    reader = fresh(url)
    assert reader.get_many(["a0"]) == {}
    assert _write(url, "a", 2).wait() == 0
    assert sorted(reader.get_many(["a0", "a1"])) == ["a0", "a1"]  # a miss rereads the published parts
    reader.close()


def test_part_torn_by_kill9_is_ignored_and_earlier_parts_are_used(tmp_path, fresh):
    url = f"parts+file://{tmp_path / 'cache'}"
    child = subprocess.run([sys.executable, "-c", WRITE_THEN_DIE, url, "3"], check=False)
    assert child.returncode == -signal.SIGKILL
    parts = sorted(p.name for p in (tmp_path / "cache" / "parts").iterdir())
    assert len(parts) == 4 and len(_published(tmp_path / "cache")) == 3  # the torn part lies there, unmarked
    reader = fresh(url)
    found = reader.get_many(["k0", "k1", "k2", "k-torn"])
    assert sorted(found) == ["k0", "k1", "k2"]
    assert compact_parts(str(tmp_path / "cache")).parts == 3  # compaction merges only published parts
    reader.close()


def test_torn_marker_is_not_trusted(tmp_path, fresh):
    root = tmp_path / "cache"
    assert _write(f"parts+{root}", "a", 2).wait() == 0
    marker = root / "markers" / _published(root)[1]
    marker.write_text(marker.read_text()[:10])  # a marker cut short by a kill
    reader = fresh(f"parts+{root}")
    assert sorted(reader.get_many(["a0", "a1"])) == ["a0"]
    reader.close()


def test_compaction_keeps_every_entry_once_and_lookups_unchanged(tmp_path, fresh):
    root = tmp_path / "cache"
    url = f"parts+{root}"
    writers = [_write(url, "a", 4), _write(url, "b", 3), _write(url, "a", 2)]  # a0, a1 answered twice
    assert [w.wait() for w in writers] == [0, 0, 0]
    keys = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(3)]
    before = fresh(url).get_many(keys)
    assert len(before) == 7

    done = compact_parts(str(root))
    assert (done.parts, done.rows, done.kept) == (9, 9, 7)
    assert len(_published(root)) == 1 and len(list((root / "parts").iterdir())) == 1
    reader = fresh(url)
    assert reader.get_many(keys) == before
    assert reader.count() == 7
    reader.close()


def test_duplicate_answers_resolve_alike_whatever_the_reading_order(tmp_path, fresh):
    """Two workers that raced on one request: every reader, and compaction, keep the earlier answer."""
    root = tmp_path / "cache"
    url = f"parts+{root}"
    first = fresh(url)
    first.put("k", "m", "t.v1", "earlier", {}, 0.5)
    second = fresh(url)
    second.put("k", "m", "t.v1", "later", {}, 0.5)  # second never saw the first's part: it asked anew
    assert fresh(url).get_many(["k"])["k"].text == "earlier"
    compact_parts(str(root))
    assert fresh(url).get_many(["k"])["k"].text == "earlier"
    first.close()
    second.close()


def test_cache_compact_command(tmp_path, fresh):
    root = tmp_path / "cache"
    assert _write(f"parts+{root}", "a", 3).wait() == 0
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"workdir": str(tmp_path / "work"), "cache_url": f"parts+{root}"}))
    result = CliRunner().invoke(app, ["cache", "compact", str(config)])
    assert result.exit_code == 0, result.output
    assert "merged 3 parts (3 rows) into one of 3 rows" in result.output
    assert len(_published(root)) == 1
    assert sorted(fresh(f"parts+{root}").get_many(["a0", "a1", "a2"])) == ["a0", "a1", "a2"]

    config.write_text(yaml.safe_dump({"workdir": str(tmp_path / "work")}))
    result = CliRunner().invoke(app, ["cache", "compact", str(config)])
    assert result.exit_code == 0 and "one SQLite file, nothing to compact" in result.output


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://db/cache", "unsupported cache_url 'postgresql://db/cache': expected sqlite:///"),
        ("parts+nosuch://bucket/cache", "unsupported URL scheme 'nosuch'"),
        ("parts+relative/cache", "a local parts folder must be an absolute path"),
        ("parts+s3://user:secret@bucket/cache", "the URL carries a credential"),
    ],
)
def test_cache_url_is_checked_at_load(tmp_path, url, says):
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"cache_url": url}))
    with pytest.raises(ConfigError, match="cache_url") as caught:
        load_config(config)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_workdir_in_an_object_store_keeps_its_cache_in_parts_beside_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MMCURATE_SCRATCH", str(tmp_path / "scratch"))
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"workdir": "s3://bucket/work/"}))
    assert load_config(config).response_cache_url == "parts+s3://bucket/work/responses"
    config.write_text(json.dumps({"workdir": str(tmp_path / "work")}))
    assert load_config(config).response_cache_url == f"sqlite:///{tmp_path / 'work' / 'responses.sqlite'}"
