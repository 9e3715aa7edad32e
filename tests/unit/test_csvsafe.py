"""CSV cells a spreadsheet would run as formulas are written as text (OWASP "CSV Injection"),
and numbers stay numbers."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.common.csvsafe import FORMULA_STARTS, csv_bytes, safe_cell, safe_frame, safe_text
from planner.errors import UsageError
from planner.simulate.metrics import RequestChunk, RequestWriter


@pytest.mark.parametrize(
    "text",
    [
        '=HYPERLINK("http://x"&A1;"x")',
        "@SUM(1)",
        "+cmd|' /C calc'!A0",
        "-2+3",
        "\tnot a tab",
        "\rnot a return",
        "-",
        "=",
        "-inf",
        "+nan",
        "-1,5",
    ],
)
def test_text_a_spreadsheet_would_run_gets_a_quote(text: str) -> None:
    assert text.startswith(FORMULA_STARTS)
    assert safe_text(text) == "'" + text
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize(
    "text", ["-2", "-2.5", "+1", "-1e-3", "+.5", "-0", "2.5", "a3-highgpu-8g", "us-east-1", ""]
)
def test_numbers_and_plain_text_are_left_alone(text: str) -> None:
    assert safe_text(text) == text


@pytest.mark.parametrize("value", [-2, -2.5, 0, float("nan"), None, True, np.float64(-1.0)])
def test_values_that_are_not_text_are_never_touched(value: object) -> None:
    assert safe_cell(value) is value


def test_a_frame_quotes_its_text_cells_and_keeps_its_numbers() -> None:
    frame = pd.DataFrame(
        {
            "instance": ["=HYPERLINK(1)", "g4dn.xlarge", None, "-2+3"],
            "cost": [-1.5, 2.0, 3.0, -4.0],
            "count": [-1, 2, 3, 4],
            "kind": pd.Categorical(["@x", "ok", "ok", "ok"]),
            "when": pd.to_datetime(["2026-01-01"] * 4),
        }
    )
    safe = safe_frame(frame)
    assert safe["instance"].tolist()[:2] == ["'=HYPERLINK(1)", "g4dn.xlarge"]
    assert safe["instance"].tolist()[3] == "'-2+3" and pd.isna(safe["instance"][2])
    assert safe["kind"].tolist() == ["'@x", "ok", "ok", "ok"]
    pd.testing.assert_series_equal(safe["cost"], frame["cost"])
    pd.testing.assert_series_equal(safe["count"], frame["count"])
    pd.testing.assert_series_equal(safe["when"], frame["when"])
    assert frame["instance"][0] == "=HYPERLINK(1)"  # the caller's frame is not changed
    rows = list(csv.reader(io.StringIO(csv_bytes(frame).decode())))
    assert rows[1][:3] == ["'=HYPERLINK(1)", "-1.5", "-1"]
    assert safe_frame(pd.DataFrame({"n": [-1.0]})).equals(pd.DataFrame({"n": [-1.0]}))


def _chunk(n: int = 2) -> RequestChunk:
    columns = {name: np.zeros(n, dtype=dtype) for name, dtype in RequestChunk.DTYPES.items()}
    columns["output_tokens"][:] = 2
    columns["class_index"][:] = np.arange(n) % 2
    return RequestChunk(**columns)


def test_requests_csv_quotes_a_class_name_a_spreadsheet_would_run(tmp_path: Path) -> None:
    path = tmp_path / "requests.csv"
    with RequestWriter(path, ("=HYPERLINK(1)", "chat")) as writer:
        writer.write(_chunk())
    frame = pd.read_csv(path)
    assert frame["class"].tolist() == ["'=HYPERLINK(1)", "chat"]
    parquet = tmp_path / "requests.parquet"
    with RequestWriter(parquet, ("=HYPERLINK(1)", "chat")) as writer:
        writer.write(_chunk())
    # Parquet holds typed values, not spreadsheet text: the name as it is
    assert pd.read_parquet(parquet)["class"].astype(str).tolist() == ["=HYPERLINK(1)", "chat"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_requests_to_a_link_are_refused_and_its_target_kept(tmp_path: Path, suffix: str) -> None:
    real = tmp_path / f"real{suffix}"
    real.write_bytes(b"precious\n")
    link = tmp_path / f"link{suffix}"
    link.symlink_to(real)
    with pytest.raises(UsageError, match="is a symbolic link"), RequestWriter(link, ("chat",)):
        pass
    assert real.read_bytes() == b"precious\n" and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([real.name, link.name])
