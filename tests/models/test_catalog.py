"""Reading a catalog of models (``mmcurate watch --catalog``; issue 31 items 4, 8, 11): a name
listed twice, a bad URL and a bad date are one line each; a quoted date is a date."""

from __future__ import annotations

from datetime import date

import pytest

from mmcurate.core.errors import ConfigError
from mmcurate.models.catalog import read_catalog

ENTRY = """  - name: {name}
    backend: scripted
    script: rules.jsonl
    revision: r1
    released: {released}
"""


def catalog(tmp_path, *entries: tuple[str, str]):
    (tmp_path / "rules.jsonl").write_text("")
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n" + "".join(ENTRY.format(name=n, released=r) for n, r in entries))
    return path


def test_a_quoted_date_is_a_date(tmp_path):
    models = read_catalog(catalog(tmp_path, ("a", '"2026-11-01"'), ("b", "2026-10-01"), ("c", "'2026-09-01'")))
    assert [m.released for m in models] == [date(2026, 11, 1), date(2026, 10, 1), date(2026, 9, 1)]


@pytest.mark.parametrize("released", ['"2026-13-01"', '"next week"', "20261101", "[2026]"])
def test_a_bad_date_is_one_line_naming_the_entry(tmp_path, released):
    with pytest.raises(ConfigError) as refused:
        read_catalog(catalog(tmp_path, ("a", "2026-11-01"), ("b", released)))
    message = str(refused.value)
    assert "\n" not in message and "models[1].released: a date YYYY-MM-DD is expected" in message


def test_duplicate_names_are_refused_in_one_line_naming_them(tmp_path):
    entries = [
        ("dup", "2026-11-01"),
        ("solo", "2026-11-01"),
        ("dup", "2026-10-01"),
        ("twice", "2026-01-01"),
        ("twice", "2026-01-02"),
    ]
    with pytest.raises(ConfigError) as refused:
        read_catalog(catalog(tmp_path, *entries))
    assert (
        str(refused.value) == f"catalog {tmp_path / 'catalog.yaml'}: model names must be unique; listed more "
        "than once: dup, twice"
    )


def test_many_duplicates_are_capped(tmp_path):
    with pytest.raises(ConfigError) as refused:
        read_catalog(catalog(tmp_path, *[(f"m{i:03d}", "2026-11-01") for i in range(40)] * 2))
    assert str(refused.value).endswith("m000, m001, m002, m003, m004, m005, m006, m007, m008, m009 and 30 more")


@pytest.mark.parametrize("url", ["http://[::1", "http://host:notaport/v1"])
def test_a_url_that_is_no_server_address_is_one_line(url):
    with pytest.raises(ConfigError) as refused:
        read_catalog(url)
    assert "\n" not in str(refused.value) and "not a server URL" in str(refused.value)
