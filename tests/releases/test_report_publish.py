"""The HTML report (rendered in headless Chromium) and publishing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from huggingface_hub.errors import HfHubHTTPError

from mmcurate.releases import publish as publish_module
from mmcurate.releases.deflectionbench.topics import topic_table
from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.publish import publish, upload_plan
from mmcurate.releases.report import write_report
from mmcurate.releases.verify import verify_release
from mmcurate.releases.writer import write_release
from tests.releases import release_builders as b
from tests.releases.cli_helpers import run_cli

CHROMIUM = Path("/usr/bin/chromium")


def test_report_has_sections_and_inline_plots(capsys, monkeypatch, copy):
    code, out, _ = run_cli(capsys, monkeypatch, "report", str(copy))
    assert code == 0
    html = (copy / "report.html").read_text()
    for section in (
        "Stage funnel",
        "Per-source statistics",
        "Convergence of gating models",
        "Judge errors",
        "Quarantine by reason",
    ):
        assert f">{section}</h2>" in html
    assert html.count("data:image/png;base64,") >= 3
    assert "<td>missing answer</td>" in html and "<td>2</td>" in html
    assert 'src="plots/' not in html and "http" not in html.split("<body>")[1]  # self-contained
    assert verify_release(copy).ok  # the report is recorded in quality/checksums.json


def test_report_names_models_judge_and_validation_with_tables_in_natural_order(capsys, monkeypatch, copy):
    code, out, err = run_cli(capsys, monkeypatch, "report", str(copy))
    assert code == 0, err
    assert out.strip() == str(copy / "report.html")
    html = (copy / "report.html").read_text()
    assert "<dt>Models</dt><dd>gating: smollm2 (embedded smollm2, revision q8)</dd>" in html
    assert "<dt>Judge</dt><dd>lexical</dd>" in html
    assert "<dt>Validation</dt><dd>passed, " in html
    funnel = html.split('id="funnel"')[1]
    assert funnel.index("<th>stage</th>") < funnel.index("<th>remaining</th>")  # as built, not alphabetical


@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless render needs Debian's chromium at /usr/bin/chromium")
def test_report_renders_in_headless_chromium(tmp_path, copy):
    from mmcurate.releases.report import write_report

    page = write_report(copy)
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1200, 2400)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert shot.stat().st_size > 20_000 and colours is not None and len(colours) > 50  # plots, not a blank page


def test_publish_refuses_unvalidated_release(capsys, monkeypatch, tmp_path, copy):
    shutil.rmtree(copy / "quality")
    assert verify_release(copy).ok
    with pytest.raises(ReleaseError, match="no validation results"):
        publish(copy, "org/bench", target_dir=tmp_path / "out")
    code, _, err = run_cli(
        capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/bench", "--target-dir", str(tmp_path / "out")
    )
    assert code == 2 and "run `mmcurate validate` first" in err
    assert not (tmp_path / "out").exists()


def test_publish_refuses_release_that_does_not_verify(tmp_path, copy):
    (copy / "README.md").write_text("edited")
    with pytest.raises(ReleaseError, match="does not verify: checksum mismatch: README.md"):
        publish(copy, "org/bench", target_dir=tmp_path / "out")


def test_publish_to_target_dir_copies_a_verifiable_release(capsys, monkeypatch, tmp_path, copy):
    target = tmp_path / "out"
    code, out, _ = run_cli(
        capsys, monkeypatch, "publish", str(copy), "--repo-id", "org/bench", "--target-dir", str(target)
    )
    assert code == 0 and out.strip() == str(target)
    copied = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert copied == sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file())
    assert verify_release(target).ok


def test_upload_plan_for_the_hub(copy, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    plan = upload_plan(copy, "my-org/deflectionbench")
    assert plan.create_repo_kwargs() == {"repo_id": "my-org/deflectionbench", "repo_type": "dataset", "exist_ok": True}
    kwargs = plan.upload_folder_kwargs()
    assert kwargs["repo_type"] == "dataset" and kwargs["folder_path"] == str(copy.resolve())
    assert (
        "manifest.json" in kwargs["allow_patterns"] and "data/test-00000-of-00002.parquet" in kwargs["allow_patterns"]
    )
    assert "quality/validation.json" in kwargs["allow_patterns"]
    assert kwargs["commit_message"] == "deflectionbench 1.0.0"
    assert plan.create_tag_kwargs()["tag"] == "v1.0.0"
    assert "hf_secret_value" not in repr(plan)
    with pytest.raises(ReleaseError, match="ORG/NAME"):
        upload_plan(copy, "no-slash")


class RecordingHub:
    """Stands in for ``huggingface_hub.HfApi``: records every call, uploads nothing."""

    calls: list[tuple[str, dict]] = []
    tokens: list[str | None] = []

    def __init__(self, token: str | None = None) -> None:
        RecordingHub.tokens.append(token)

    def create_repo(self, **kwargs):
        RecordingHub.calls.append(("create_repo", kwargs))

    def upload_folder(self, **kwargs):
        RecordingHub.calls.append(("upload_folder", kwargs))
        return SimpleNamespace(commit_url="https://hub.example/datasets/my-org/bench/commit/abc123")

    def create_tag(self, **kwargs):
        RecordingHub.calls.append(("create_tag", kwargs))


def test_publish_uploads_the_verified_files_and_tags_the_version(capsys, monkeypatch, copy):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setattr(publish_module, "HfApi", RecordingHub)
    RecordingHub.calls, RecordingHub.tokens = [], []
    code, out, err = run_cli(capsys, monkeypatch, "publish", str(copy), "--repo-id", "my-org/bench")
    assert code == 0, err
    assert out.strip() == "https://hub.example/datasets/my-org/bench/commit/abc123"
    assert RecordingHub.tokens == ["hf_secret_value"]
    assert [name for name, _ in RecordingHub.calls] == ["create_repo", "upload_folder", "create_tag"]
    plan = upload_plan(copy, "my-org/bench")
    assert [kwargs for _, kwargs in RecordingHub.calls] == [
        plan.create_repo_kwargs(),
        plan.upload_folder_kwargs(),
        plan.create_tag_kwargs(),
    ]
    uploaded = set(RecordingHub.calls[1][1]["allow_patterns"])
    assert uploaded == {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}  # all, verified
    assert "hf_secret_value" not in out + err


def test_a_hub_that_refuses_the_upload_is_one_line(capsys, monkeypatch, copy):
    class Refusing(RecordingHub):
        def create_repo(self, **kwargs):
            request = httpx.Request("POST", "https://hub.example/api/repos/create")
            raise HfHubHTTPError(
                "403 Forbidden: you cannot write to my-org", response=httpx.Response(403, request=request)
            )

    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setattr(publish_module, "HfApi", Refusing)
    code, _, err = run_cli(capsys, monkeypatch, "publish", str(copy), "--repo-id", "my-org/bench")
    assert (
        code == 2
        and err == "mmcurate: error: upload of my-org/bench failed: 403 Forbidden: you cannot write to my-org\n"
    )


DEFLECTION_SECTIONS = (
    "Per-source statistics",
    "Topic distribution before and after curation",
    "Convergence of gating models",
    "Judge errors",
)


def _sections(html: str) -> list[str]:
    return re.findall(r"<h2>([^<]+)</h2>", html)


def test_a_report_shows_each_section_once(tmp_path, store_and_shas):
    """The topic table is in its own section (with its plot), not again among the other tables."""
    store, shas = store_and_shas
    draft = b.deflection_draft(b.deflection_rows(shas))
    draft.statistics = {
        **draft.statistics,
        "topics": topic_table({"webqa/space": 4}, {"webqa/space": 3}),
        "near_duplicates": [{"against": "this release", "kind": "image", "flagged": 0}],
    }
    sections = _sections(write_report(write_release(draft, tmp_path, store)).read_text())
    assert len(sections) == len(set(sections)), sections
    assert set(DEFLECTION_SECTIONS) <= set(sections) and "Topics" not in sections and "Near duplicates" not in sections


def test_a_report_shows_only_the_sections_its_release_has(reflvqa_release, tmp_path, store_and_shas):
    """A release that records no DeflectionBench statistics (here RefLVQA; the flows' tests check
    ReflectV, POPE and CRAG-MM) shows none of their sections, not even empty."""
    sections = _sections(write_report(reflvqa_release).read_text())
    assert not set(DEFLECTION_SECTIONS) & set(sections), sections
    assert "Stage funnel" in sections and "Model calls" not in sections  # its manifest records no calls


@pytest.mark.parametrize("which", ["deflection", "reflvqa"])
def test_a_published_folder_loads_every_config_with_datasets(
    which, capsys, monkeypatch, tmp_path, deflection_release, reflvqa_release
):
    """The card's header, written through huggingface_hub's DatasetCardData, names a config per
    table: ``datasets.load_dataset(DIR, config)`` reads each from a ``publish --target-dir`` copy."""
    from datasets import load_dataset
    from huggingface_hub import DatasetCard

    from mmcurate.releases.reader import open_release

    release = {"deflection": deflection_release, "reflvqa": reflvqa_release}[which]
    target = tmp_path / "out"
    assert (
        run_cli(capsys, monkeypatch, "publish", str(release), "--repo-id", "org/bench", "--target-dir", str(target))[0]
        == 0
    )
    opened = open_release(target)
    card = DatasetCard.load(target / "README.md")
    assert [c["config_name"] for c in card.data.configs] == opened.configs
    for config in opened.configs:
        loaded = load_dataset(
            str(target), config, split=opened.manifest.split or "test", cache_dir=str(tmp_path / "hf")
        )
        assert loaded.num_rows == opened.manifest.counts.rows[config], config
