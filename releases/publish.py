"""Publish a verified, validated release to the Hugging Face Hub (or copy it to a folder).

The hub upload is described by a pure ``UploadPlan`` first, so what would be sent can be
checked without a network. The token comes from ``HF_TOKEN`` (or the token saved by
``hf auth login``) and is only handed to ``HfApi``: it is never printed or written. No token,
offline mode or a Hub that cannot be reached are one-line errors.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import OfflineModeIsEnabled

from mmcurate.core.plural import listed

from .errors import ReleaseError
from .manifest import ARTIFACT_CHECKSUMS, MANIFEST, post_seal_entries, recorded_validation
from .reader import open_release, refuse_inside_release
from .verify import verify_release

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class UploadPlan:
    repo_id: str
    folder: Path
    files: tuple[str, ...]  # paths relative to ``folder``
    commit_message: str
    tag: str
    repo_type: str = "dataset"

    def create_repo_kwargs(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "repo_type": self.repo_type, "exist_ok": True}

    def upload_folder_kwargs(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "repo_type": self.repo_type,
            "folder_path": str(self.folder),
            "allow_patterns": list(self.files),
            "commit_message": self.commit_message,
        }

    def create_tag_kwargs(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "repo_type": self.repo_type, "tag": self.tag, "exist_ok": True}


def publishable_files(path: Path) -> list[str]:
    """Exactly the files ``verify`` vouches for, plus the two checksum lists."""
    manifest = open_release(path).manifest
    files = set(manifest.files) | {MANIFEST}
    later = post_seal_entries(path)
    if later:
        files |= set(later) | {ARTIFACT_CHECKSUMS}
    return sorted(files)


def check_publishable(path: Path) -> None:
    """Refuse a release that does not verify or has no passing validation results."""
    verified = verify_release(path)
    if not verified.ok:
        raise ReleaseError(f"release {path} does not verify: " + listed(verified.problems(), sep="; "))
    validation = recorded_validation(path)
    if validation is None:
        raise ReleaseError(f"release {path} has no validation results in quality/: run `mmcurate validate` first")
    if not validation.get("success"):
        raise ReleaseError(
            f"release {path} failed validation ({len(validation.get('failures', []))} failing expectations)"
        )


def upload_plan(path: Path | str, repo_id: str) -> UploadPlan:
    path = Path(path)
    if not REPO_ID.match(repo_id):
        raise ReleaseError(f"repo id {repo_id!r} is not of the form ORG/NAME")
    release = open_release(path)
    return UploadPlan(
        repo_id=repo_id,
        folder=path.resolve(),
        files=tuple(publishable_files(path)),
        commit_message=f"{release.benchmark} {release.version}",
        tag=f"v{release.version}",
    )


def check_target(target: Path) -> None:
    """``--target-dir`` must be a new or empty folder outside every release."""
    if target.exists() and not target.is_dir():
        raise ReleaseError(f"--target-dir {target} is a file, not a folder")
    refuse_inside_release(target, "--target-dir")
    if target.exists() and any(target.iterdir()):
        raise ReleaseError(f"target directory {target} is not empty")


def copy_release(plan: UploadPlan, target: Path) -> Path:
    """The local stand-in for the upload: the same file selection, copied to ``target``. A
    symbolic link (which ``verify`` refuses) is never followed, whichever part of a path it is."""
    check_target(target)
    for rel in plan.files:
        parts = Path(rel).parts
        if any(plan.folder.joinpath(*parts[:n]).is_symlink() for n in range(1, len(parts) + 1)):
            raise ReleaseError(f"release {plan.folder}: {rel} goes through a symbolic link; a release holds no links")
    for rel in plan.files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(plan.folder / rel, dest, follow_symlinks=False)
    return target


def upload(plan: UploadPlan) -> str:
    """Create the dataset repo if needed, upload the files, tag the version; return the commit URL."""
    token = get_token()
    if not token:
        raise ReleaseError(
            "publishing to the Hub needs a token: set HF_TOKEN (or run `hf auth login`), "
            "or copy the release with --target-dir"
        )
    api = HfApi(token=token)
    try:
        api.create_repo(**plan.create_repo_kwargs())
        commit = api.upload_folder(**plan.upload_folder_kwargs())
        api.create_tag(**plan.create_tag_kwargs())
    except OfflineModeIsEnabled:
        raise ReleaseError(
            "cannot publish to the Hub in offline mode (HF_HUB_OFFLINE is set); "
            "unset it, or copy the release with --target-dir"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the Hub's and its HTTP library's errors, whatever the version
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ReleaseError(f"upload of {plan.repo_id} failed: {reason}") from None
    return str(getattr(commit, "commit_url", commit))


def publish(path: Path | str, repo_id: str, target_dir: Path | None = None) -> str:
    """Check, plan and upload (or copy to ``target_dir``); return where it went."""
    path = Path(path)
    if target_dir is not None:
        check_target(Path(target_dir))
    check_publishable(path)
    plan = upload_plan(path, repo_id)
    if target_dir is not None:
        return str(copy_release(plan, Path(target_dir)))
    return upload(plan)
