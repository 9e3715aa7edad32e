"""Regions and instance types in a price sheet are names as clouds write them: formulas and
look-alike characters are refused with the file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import InputFileError
from pricing.sheets import IDENTIFIER, IDENTIFIER_COLUMNS, read_sheet_rows
from pricing.snapshot import load_snapshot

HEADER = "provider,region,instance_type,purchase_option,usd_per_hour\n"


def _rows(tmp_path: Path, region: str, instance: str) -> list[dict[str, str]]:
    path = tmp_path / "prices.csv"
    path.write_text(
        HEADER + f"aws,us-east-1,p5.48xlarge,on-demand,98\naws,{region},{instance},on-demand,50\n",
        encoding="utf-8",
    )
    _header, rows = read_sheet_rows(path)
    return [dict(row.values) for row in rows]


@pytest.mark.parametrize(
    "instance",
    [
        '"=HYPERLINK(""http://x""&A1;""x"")"',
        "@SUM(1)",
        "+cmd|' /C calc'!A0",
        "-2+3",
        "p5.48\u00a0xlarge",  # a no-break space inside the name
        "p5 48xlarge",
        "p5.48xlarge\u2010",
    ],
)
def test_an_instance_type_that_is_no_cloud_name_is_refused(tmp_path: Path, instance: str) -> None:
    with pytest.raises(InputFileError) as caught:
        _rows(tmp_path, "us-east-1", instance)
    message = str(caught.value)
    assert str(tmp_path / "prices.csv") in message
    assert "row 2, line 3, column 'instance_type'" in message
    assert "expected a name as clouds write them" in message


def test_a_region_with_look_alike_hyphens_is_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(InputFileError) as caught:
        _rows(tmp_path, "us\u2010east\u20101", "p5.48xlarge")
    message = str(caught.value)
    assert "row 2, line 3, column 'region'" in message
    assert "U+2010 HYPHEN" in message and "ASCII" in message


@pytest.mark.parametrize(
    ("region", "instance"),
    [
        ("us-east-1", "p5.48xlarge"),
        ("europe-west4", "a3-highgpu-8g"),
        ("eastus", "Standard_ND96isr_H100_v5"),
        ("dc1", "gpu/8xh100:spot"),
    ],
)
def test_names_clouds_use_are_kept(tmp_path: Path, region: str, instance: str) -> None:
    rows = _rows(tmp_path, region, instance)
    assert (rows[1]["region"], rows[1]["instance_type"]) == (region, instance)


def test_every_bundled_price_has_a_valid_region_and_instance_type() -> None:
    points = load_snapshot()
    assert points
    for point in points:
        for column in IDENTIFIER_COLUMNS:
            assert IDENTIFIER.fullmatch(getattr(point, column)), (column, point)
