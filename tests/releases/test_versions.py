"""Release versions: only MAJOR.MINOR.PATCH, ordered by number (1.10.0 after 1.9.0)."""

from __future__ import annotations

import pytest

from mmcurate.releases.errors import ReleaseError
from mmcurate.releases.reader import list_versions
from mmcurate.releases.versions import check_successor, next_minor, parse_version


def test_versions_order_by_number_not_text(tmp_path):
    for name in ("1.10.0", "1.9.0", "1.9.10", "1.9.2", "10.0.0", "2.0.0", "1.0", "draft", "01.0.0"):
        (tmp_path / "deflectionbench" / name).mkdir(parents=True)
    assert list_versions(tmp_path, "deflectionbench") == ["1.9.0", "1.9.2", "1.9.10", "1.10.0", "2.0.0", "10.0.0"]
    check_successor("1.10.0", "1.9.0")
    with pytest.raises(ReleaseError, match="must be greater than its parent 1.10.0"):
        check_successor("1.9.0", "1.10.0")
    assert next_minor("1.9.3") == "1.10.0"


@pytest.mark.parametrize("text", ["1.0", "1.0.0rc1", "v1.0.0", "01.0.0", "", "1.0.0.0"])
def test_only_plain_semantic_versions_are_releases(text):
    with pytest.raises(ReleaseError, match="is not a semantic version like 1.0.0"):
        parse_version(text)
