"""``mmcurate watch`` (issue 27.1) on a scripted DeflectionBench release.

Catalogs: a YAML file and the real llama.cpp server's model list (GET /v1/models); a dead
server is one line. The plan names only the new models; ``--run`` refuses over budget
before any call, re-curates, verifies and publishes to a folder, and a Prefect notification
block hears the outcome, success or failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.models.catalog import read_catalog
from mmcurate.models.client import ModelClient
from mmcurate.planning.watch import propose
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.reader import list_versions, open_release
from mmcurate.releases.verify import verify_release
from tests.flows import flowkit
from tests.releases.cli_helpers import run_cli

pytestmark = pytest.mark.slow
TOLD: list[tuple[str | None, str]] = []  # what the test notification block was told
HUBBLE = "Question: In what year was the Hubble Space Telescope launched?"


@pytest.fixture(scope="module")
def built(tmp_path_factory, fixtures_root, prefect_harness) -> tuple[Path, Path, Path]:
    """A scripted release of the dry run's reader, and a catalog naming it and a newer "knower"."""
    from mmcurate.flows.deflectionbench.curate import deflectionbench

    home = tmp_path_factory.mktemp("watch") / "home"
    home.mkdir()
    (home / "knower.jsonl").write_text(
        json.dumps({"when_all": [HUBBLE], "when_none": ["Evidence:"], "answer": "1990"}) + "\n"
    )
    config = flowkit.scripted_config(home, fixtures_root, models={"vlm-reader": flowkit.READER})
    catalog = home / "catalog.yaml"
    catalog.write_text(f"""models:
  - name: vlm-reader
    backend: scripted
    script: {flowkit.READER["script"]}
    default: Atlantis
    revision: dryrun-1
    vision: true
    released: 2024-01-01
  - name: knower
    backend: scripted
    script: knower.jsonl    # relative to the catalog's folder
    default: Atlantis
    revision: knower-1
    released: 2026-10-01
    note: knows Hubble
""")
    return home, catalog, Path(deflectionbench(config=str(config)))


def test_a_yaml_catalog_proposes_the_new_model_and_its_plan(built, tmp_path):
    home, catalog, release = built
    proposal = propose(release, str(catalog), None, tmp_path)
    assert [m.spec.name for m in proposal.new] == ["knower"] and len(proposal.models) == 2
    assert str(proposal.new[0].released) == "2026-10-01"
    assert {row.model for row in proposal.plan.rows} == {"knower"}
    samples = len(open_release(release).sample_ids)
    stage_i = [r for r in proposal.plan.rows if r.step == "parametric"]
    assert stage_i and stage_i[0].requests == samples
    assert not [r for r in proposal.plan.rows if r.step == "oracle.gold"]  # the reader settled every gold check
    text = proposal.render()
    assert "+ knower: scripted" in text and "released 2026-10-01, role gating (knows Hubble)" in text
    assert "1.0.0 -> 1.1.0" in text and "parametric" in text and "run it: mmcurate watch" in text
    # watch --run printed "run it: ... --run", a hint to run what it was running (issue 31 item 22)
    assert "run it:" not in proposal.render(hint=False) and "parametric" in proposal.render(hint=False)


def test_the_llama_server_model_list_is_a_catalog(built, llama_server, tmp_path):
    models = read_catalog(llama_server.base_url)
    assert [(m.spec.name, m.spec.backend, m.spec.base_url) for m in models] == [
        ("smollm2", "openai", llama_server.base_url)
    ]
    proposal = propose(built[2], llama_server.base_url, None, tmp_path)
    assert [m.spec.name for m in proposal.new] == ["smollm2"]
    assert {row.model for row in proposal.plan.rows} == {"smollm2"} and proposal.plan.total().requests > 0


def test_a_dead_server_is_one_line(capsys, monkeypatch, built):
    from mmcurate.models.backends.embedded import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(ConfigError) as refused:
        read_catalog(dead)
    assert "\n" not in str(refused.value) and "cannot be reached" in str(refused.value)
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(built[2]), "--catalog", dead)
    assert code == 2 and err.count("\n") == 1 and "cannot be reached" in err


@pytest.mark.parametrize("url", ["http://[::1", "http://host:notaport/v1"])
def test_a_catalog_url_that_is_no_address_is_one_line(capsys, monkeypatch, built, url):
    """Issue 31 item 8: httpx.InvalidURL was a traceback."""
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(built[2]), "--catalog", url)
    assert code == 2 and err.count("\n") == 1 and err.startswith("mmcurate: error: ") and "not a server URL" in err


def entry(name: str, revision: str = "dryrun-1", **more: str) -> str:
    lines = [
        f"  - name: {name}",
        "    backend: scripted",
        f"    script: {flowkit.READER['script']}",
        "    default: Atlantis",
        f"    revision: {revision}",
        "    vision: true",
        "    released: 2026-01-01",
    ]
    return "\n".join(lines + [f"    {k}: {v}" for k, v in more.items()]) + "\n"


def test_a_catalog_model_of_a_known_name_with_another_revision_is_new_and_says_what_differs(built, tmp_path):
    """Issue 31 item 3: matched by name only, it was "0 new"."""
    home, _, release = built
    catalog = home / "revised.yaml"
    catalog.write_text("models:\n" + entry("vlm-reader", "dryrun-2"))
    proposal = propose(release, str(catalog), None, tmp_path)
    assert [m.spec.name for m in proposal.new] == ["vlm-reader"] and proposal.run is None
    text = proposal.render()
    assert "1 model, 1 new" in text and "+ vlm-reader: scripted" in text
    assert "not the release's vlm-reader: revision dryrun-1 -> dryrun-2" in text
    assert "nothing to re-curate: the new models need names of their own" in text
    catalog.write_text("models:\n" + entry("vlm-reader"))  # the same identity: known
    assert propose(release, str(catalog), None, tmp_path).new == []


def test_a_bad_catalog_role_names_the_catalog_entry(capsys, monkeypatch, built):
    """Issue 31 item 17: it named a temporary spec file and an --add-model the user never passed."""
    home, _, release = built
    catalog = home / "roles.yaml"
    catalog.write_text("models:\n" + entry("w0", "w0-1") + entry("w1", "w1-1", role="judge"))
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(release), "--catalog", str(catalog))
    assert code == 2 and err.count("\n") == 1
    assert err == (
        f"mmcurate: error: catalog {catalog}: models[1] (w1): role 'judge' is not one of deflectionbench's "
        "re-curation roles (gating)\n"
    )
    assert "--add-model" not in err and "mmcurate-watch-" not in err


def test_the_command_prints_the_plan(capsys, monkeypatch, built):
    home, catalog, release = built
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(release), "--catalog", str(catalog))
    assert code == 0 and "1 new" in out and "+ knower" in out and "total" in out
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(release), "--catalog", str(catalog), "--max-calls", "2")
    assert code == 2 and "over --max-calls 2" in err


@pytest.fixture(scope="module")
def notifier(prefect_harness):
    """A notification block that appends what it is told to a list (no network)."""
    from prefect.blocks.notifications import NotificationBlock

    class TestNotebook(NotificationBlock):
        _block_type_slug = "test-notebook"

        def notify(self, body: str, subject: str | None = None) -> None:
            TOLD.append((subject, body))

    TestNotebook().save("watch-test", overwrite=True)
    return TOLD


def test_run_refuses_over_budget_before_any_call_and_says_so(built, notifier, monkeypatch):
    from mmcurate.flows.watch import watch

    home, catalog, release = built
    called: list[str] = []
    monkeypatch.setattr(ModelClient, "chat", lambda self, requests, stage: called.append(self.spec.name))
    notifier.clear()
    with pytest.raises(ReleaseError, match="over --max-calls 1"):
        watch(
            release=str(release), catalog=str(catalog), run=True, max_calls=1, notify_block="test-notebook/watch-test"
        )
    assert called == [] and list_versions(release.parent.parent, "deflectionbench") == ["1.0.0"]
    ((subject, body),) = notifier
    assert "failed" in subject and "over --max-calls 1" in body


def test_run_refuses_max_cost_for_a_hosted_model_without_a_price(built, notifier, monkeypatch, tmp_path):
    """Issue 42 item 13: an ``openai`` model at a hosted ``base_url`` without prices was planned at
    $0.00 and ``watch --run --max-cost 1`` called it; its cost is unknown, and --max-cost refuses."""
    from mmcurate.flows.watch import watch

    home, _, release = built
    catalog = tmp_path / "hosted.yaml"
    catalog.write_text("""models:
  - name: hosted-vlm
    backend: openai
    base_url: https://api.together.xyz/v1
    model: Qwen/Qwen2.5-VL-72B-Instruct
    api_key_env: TOGETHER_API_KEY
    vision: true
    released: 2026-11-01
""")
    monkeypatch.setenv("TOGETHER_API_KEY", "test-not-a-real-key")  # so only the budget can stop the run
    called: list[str] = []
    monkeypatch.setattr(ModelClient, "chat", lambda self, requests, stage: called.append(self.spec.name))
    versions = list_versions(release.parent.parent, "deflectionbench")
    with pytest.raises(ReleaseError, match=r"price not set: cost unknown for hosted-vlm, so --max-cost \$1.00"):
        watch(release=str(release), catalog=str(catalog), run=True, max_cost=1, notify_block="test-notebook/watch-test")
    assert called == [] and list_versions(release.parent.parent, "deflectionbench") == versions
    plan = propose(release, str(catalog), None, tmp_path / "specs").plan
    assert plan is not None and plan.total().cost is None


def test_run_recurates_verifies_publishes_and_notifies(built, notifier, tmp_path, caplog):
    from mmcurate.flows.watch import watch

    home, catalog, release = built
    notifier.clear()
    caplog.clear()
    outcome = watch(
        release=str(release),
        catalog=str(catalog),
        run=True,
        max_calls=1000,
        target_dir=str(tmp_path / "published"),
        notify_block="test-notebook/watch-test",
    )
    new = Path(outcome["recurated"])
    assert new == release.parent / "1.1.0" and verify_release(new).ok
    assert [m.name for m in open_release(new).manifest.models] == ["vlm-reader", "knower"]
    assert outcome["published"] == str(tmp_path / "published")
    assert verify_release(tmp_path / "published").ok and (tmp_path / "published" / "CHANGELOG.md").is_file()
    ((subject, body),) = notifier
    assert "re-curated as" in subject and "`knower`" in body and "Published" in body
    assert "1.0.0 -> 1.1.0" in caplog.text and "run it:" not in caplog.text  # what the flow printed


def test_a_later_version_that_differs_names_watchs_own_options_in_one_capped_line(capsys, monkeypatch, built):
    """Issue 31 item 10: after 1.1.0 was published, watching 1.0.0 with another catalog named
    ``--version`` (watch has none), in one line as long as the catalog (101 KB for 10,000 models)."""
    home, catalog, release = built
    assert list_versions(release.parent.parent, "deflectionbench") == ["1.0.0", "1.1.0"]  # the run above
    big = home / "big.yaml"
    big.write_text("models:\n" + "".join(entry(f"m{i:04d}", f"m{i:04d}-1") for i in range(2000)))
    code, out, err = run_cli(capsys, monkeypatch, "watch", str(release), "--catalog", str(big))
    assert code == 2 and err.count("\n") == 1 and len(err) < 2000
    assert "--version" not in err and "deflectionbench 1.1.0 exists and this run differs from it" in err
    assert f"watch the newest release instead: mmcurate watch {release.parent / '1.1.0'} --catalog {big}" in err
    assert "and 1,998 more]" in err  # the pool's list, capped
