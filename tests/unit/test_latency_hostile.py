"""Hostile input to the latency model's library: measurement files, loads and names that must
end in a clear, located error (a PlannerError), never an internal error or a silent number."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from planner.errors import InputFileError, PlannerError, UsageError
from planner.latency.calibration import (
    REQUIRED_COLUMNS,
    Measurement,
    calibrate,
    compare_fit,
    fitted_params,
    read_measurements,
)
from planner.latency.catalog import (
    CatalogError,
    load_catalog,
    load_gpus,
    load_models,
    load_precisions,
)
from planner.latency.model import Deployment, LatencyModel
from planner.latency.profile import Profile, ProfileError, choose_profile, load_bundled_profiles
from planner.latency.registry import export_profile
from planner.latency.serving import SaturatedError, saturation_qps, steady_state
from planner.paths import data_dir
from tests.conftest import WriteFile

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD_ROW = "Llama-3.1-8B,H100 80GB HBM3,1,BF16,467,256,QPS=2,mean_TTFT,23.0,ms"


def model(name: str = "llama-3.1-8b") -> LatencyModel:
    c = load_catalog()
    deployment = Deployment(
        gpu=c.gpus.get("H100-SXM"), model=c.models.get(name), precision=c.precisions.get("bf16")
    )
    return LatencyModel(deployment, Profile("t"))


# --- the measurement file as a whole ---------------------------------------------------------


def test_a_byte_order_mark_before_the_header_is_read(write: WriteFile) -> None:
    path = write("m.csv", f"\ufeff{HEADER}\n{GOOD_ROW}\n")
    points, _ = read_measurements(path)
    assert [p.model for p in points] == ["llama-3.1-8b"]


@pytest.mark.parametrize("content", ["", "\n\n", "\ufeff", "   \n"])
def test_an_empty_file_says_it_is_empty(write: WriteFile, content: str) -> None:
    path = write("m.csv", content)
    with pytest.raises(InputFileError, match="empty file; expected a header row with model, gpu"):
        read_measurements(path)


def test_a_header_without_rows_says_so(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER}\n")
    with pytest.raises(InputFileError, match="no measurement rows after the header"):
        read_measurements(path)


def test_a_folder_is_not_a_measurement_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a folder"):
        read_measurements(tmp_path)


def test_bytes_that_are_not_utf8_name_their_line(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW}\n".encode() + b"x\xff\xfe,1\n")
    with pytest.raises(InputFileError, match="line 3: not UTF-8 text") as info:
        read_measurements(path)
    assert info.value.problem.line == 3


def test_a_nul_byte_is_a_located_error(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW}\n{GOOD_ROW}\x00\n")
    with pytest.raises(InputFileError, match="line 3"):
        read_measurements(path)


def test_a_short_row_names_the_first_missing_column(write: WriteFile) -> None:
    short = GOOD_ROW.rsplit(",", 3)[0]  # no metric, value, unit
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW}\n{short}\n")
    with pytest.raises(InputFileError, match="missing value") as info:
        read_measurements(path)
    problem = info.value.problem
    assert (problem.row, problem.line, problem.column) == (2, 3, "metric")


def test_lines_count_blank_lines_and_quoted_newlines(write: WriteFile) -> None:
    quoted = '"Llama-3.1-8B",H100 80GB HBM3,1,BF16,467,256,QPS=2,mean_TTFT,23.0,ms'
    bad = GOOD_ROW.replace(",ms", ",minutes")
    path = write("m.csv", f'{HEADER},notes\n\n{quoted},"two\nlines"\n{bad},x\n')
    with pytest.raises(InputFileError) as info:
        read_measurements(path)
    assert (info.value.problem.row, info.value.problem.line) == (2, 5)


# --- values of one row -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replace", "by", "column", "message"),
    [
        (",467,", ",-1,", "input_len", "expected a whole number of tokens, at least 1, got '-1'"),
        (",467,", ",0,", "input_len", "at least 1, got '0'"),
        (",256,", ",0,", "output_len", "at least 1, got '0'"),
        (",467,", ",12abc,", "input_len", "expected a whole number of tokens"),
        (",467,", ",nan,", "input_len", "expected a whole number of tokens"),
        (
            ",467,256,",
            ",130000,2000,",
            "input_len",
            "132,000 tokens exceed the 131,072-token context of llama-3.1-8b",
        ),
        (",1,BF16", ",0,BF16", "num_gpus", "expected a power of two from 1 to 8, got '0'"),
        (",1,BF16", ",3,BF16", "num_gpus", "expected a power of two from 1 to 8, got '3'"),
        (",1,BF16", ",16,BF16", "num_gpus", "expected a power of two from 1 to 8, got '16'"),
        (",1,BF16", ",-2,BF16", "num_gpus", "expected a power of two"),
        ("QPS=2", "0.5", "batch_or_concurrency", "expected a whole number of sequences"),
        ("QPS=2", "concurrency=2.5", "batch_or_concurrency", "a whole number"),
        ("QPS=2", "concurrency=1e9", "batch_or_concurrency", "from 1 to 1,000,000"),
        ("QPS=2", "QPS=nan", "batch_or_concurrency", "positive number"),
        ("23.0", "inf", "value", "expected a positive latency"),
        ("23.0", "nan", "value", "expected a positive latency"),
        ("23.0", "1e400", "value", "expected a positive latency"),
        ("23.0", "0", "value", "expected a positive latency"),
        ("23.0", "1e12", "value", "under a day"),
        ("23.0", "1e-300", "value", "at least 0.01 ms"),
        ("H100 80GB HBM3", "\x1b[31mH100", "gpu", r"unknown GPU '\\x1b\[31mH100'"),
        ("H100 80GB HBM3", "", "gpu", "missing value"),
        ("BF16", "FP8", "precision", "no FP8 tensor-core peak"),
    ],
)
def test_nonsensical_values_are_located_errors(
    write: WriteFile, replace: str, by: str, column: str, message: str
) -> None:
    row = GOOD_ROW.replace(replace, by)
    if by == "FP8":
        row = row.replace("H100 80GB HBM3", "A100-80GB")
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW}\n{row}\n")
    with pytest.raises(InputFileError, match=message) as info:
        read_measurements(path)
    problem = info.value.problem
    assert (problem.row, problem.line, problem.column) == (2, 3, column)
    assert str(path) in str(info.value)


def test_an_unknown_kv_cache_is_a_located_error(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER},kv_cache\n{GOOD_ROW},int2\n")
    with pytest.raises(
        InputFileError, match="expected fp32, fp16, bf16 or fp8, got 'int2'"
    ) as info:
        read_measurements(path)
    assert info.value.problem.column == "kv_cache"


def test_a_huge_cell_is_cut_in_the_message(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW.replace('23.0', 'x' * 5000)}\n")
    with pytest.raises(InputFileError) as info:
        read_measurements(path)
    assert len(str(info.value)) < 400 and "5,000 characters" in str(info.value)


# --- calibration ------------------------------------------------------------------------------


def point(**change: object) -> Measurement:
    base: dict[str, object] = {
        "gpu": "H100-SXM",
        "model": "llama-3.1-8b",
        "precision": "bf16",
        "tp": 1,
        "engine": "trtllm",
        "kv_cache": "fp16",
        "input_tokens": 1024,
        "output_tokens": 128,
        "load_kind": "batch",
        "load": 1.0,
        "metric": "tpot",
        "value": 8.0,
    }
    return Measurement(**{**base, **change})  # type: ignore[arg-type]


def good_points() -> list[Measurement]:
    """Enough batch-1 points for every parameter a calibration fits: TPOT and TTFT at five
    prompt lengths (the values need only be plausible, not measured)."""
    sizes = (128, 256, 512, 1024, 2048)
    tpots = [point(input_tokens=n, value=7.0 + n / 1000) for n in sizes]
    ttfts = [point(input_tokens=n, metric="ttft", value=5.0 + n / 50) for n in sizes]
    return tpots + ttfts


def test_a_static_batch_beyond_the_kv_cache_is_excluded_with_the_reason() -> None:
    huge = point(load=1_000_000.0, row=9)
    report = calibrate([*good_points(), huge], Profile("x"), holdout=0.0)
    (excluded,) = report.excluded
    assert excluded.row == 9
    assert "1,000,000 sequences" in excluded.reason and "KV cache" in excluded.reason


def test_a_holdout_that_leaves_too_few_points_to_fit_says_so() -> None:
    good = good_points()
    with pytest.raises(UsageError, match="--holdout 0.99 leaves 0 of the 10 measurements"):
        calibrate(good, Profile("x"), holdout=0.99)
    needs = len(fitted_params(good))
    few = good[: needs - 1]
    with pytest.raises(
        PlannerError,
        match=f"{needs - 1} usable measurements \\(1 excluded\\) cannot fit {needs}",
    ):
        calibrate([*few, point(load=1_000_000.0)], Profile("x"), holdout=0.0)


def test_a_summary_without_held_out_points_is_valid_json() -> None:
    summary = calibrate(good_points(), Profile("x"), holdout=0.0).summary()
    json.dumps(summary, allow_nan=False)  # no NaN: empty summaries are null
    assert summary["heldout_test"]["points"] == 0 and summary["heldout_test"]["mape"] is None


def test_compare_fit_refuses_a_worse_fit_and_a_non_finite_one() -> None:
    assert compare_fit(0.05, 0.10) is None
    assert compare_fit(0.104, 0.10) is None  # within the tolerance: as good
    worse = compare_fit(0.20, 0.10)
    assert worse is not None and "MAPE 20.0%" in worse and "10.0%" in worse
    broken = compare_fit(math.inf, 0.10)
    assert broken is not None and "not finite" in broken
    absurd = compare_fit(2.9e233, 0.1)
    assert absurd is not None and "MAPE 2.9e+235%" in absurd  # not 235 digits


def test_a_duplicated_column_is_refused(write: WriteFile) -> None:
    path = write("m.csv", f"{HEADER},model\n{GOOD_ROW},x\n")
    with pytest.raises(InputFileError, match="column 'model' appears more than once"):
        read_measurements(path)


def test_a_cell_over_the_csv_field_limit_names_its_line(write: WriteFile) -> None:
    path = write("m.csv", f'{HEADER}\n{GOOD_ROW}\n{GOOD_ROW},"{"x" * 200_000}"\n')
    with pytest.raises(InputFileError, match="line 3: not a readable CSV file"):
        read_measurements(path)


# --- the load model ---------------------------------------------------------------------------


def test_saturation_is_a_planner_error() -> None:
    with pytest.raises(
        PlannerError, match="1e\\+06 prompts/s of 1,024 tokens need more than the 8,192-token"
    ):
        steady_state(model(), 1024, 256, "qps", 1e6)
    assert issubclass(SaturatedError, PlannerError)


@pytest.mark.parametrize("load", [1e10, 1e100, 1e308])
def test_an_absurd_rate_is_saturated_not_nan(load: float) -> None:
    with pytest.raises(SaturatedError, match="iteration budget"):
        steady_state(model(), 1024, 256, "qps", load)


def test_saturation_qps_is_the_edge_of_the_load_model() -> None:
    m = model()
    edge = saturation_qps(m, 1024, 256)
    assert edge > 0
    steady_state(m, 1024, 256, "qps", edge)  # served
    with pytest.raises(SaturatedError):
        steady_state(m, 1024, 256, "qps", edge * 1.01)


@pytest.mark.parametrize("load", [math.nan, math.inf, -1.0, 0.0])
def test_non_finite_or_non_positive_loads_are_usage_errors(load: float) -> None:
    with pytest.raises(UsageError):
        steady_state(model(), 1024, 256, "qps", load)


# --- names and profiles -----------------------------------------------------------------------


def test_unknown_names_are_quoted_safely_and_cut() -> None:
    with pytest.raises(UsageError) as info:
        load_catalog().gpus.get("\x1b[2J" + "x" * 10_000)
    message = str(info.value)
    assert "\x1b" not in message and len(message) < 400


def test_unknown_engine_is_quoted_safely() -> None:
    with pytest.raises(ProfileError) as info:
        choose_profile([Profile("a")], "H100-SXM", "\x1b[31mvllm")
    assert "\x1b" not in str(info.value)


@pytest.mark.parametrize(
    "content", ["{}", '{"profiles": [{"x": 1}]}', '{"profiles": 3}', "[1]", "not json"]
)
def test_a_malformed_profiles_file_is_a_profile_error(write: WriteFile, content: str) -> None:
    path = write("profiles.json", content)
    with pytest.raises(ProfileError, match=str(path)):
        load_bundled_profiles(path)


@pytest.mark.parametrize("content", ["{}", "[]", '{"profiles": [1]}', "not json", "\xff"])
def test_exporting_into_a_malformed_file_is_refused_untouched(
    write: WriteFile, content: str
) -> None:
    path = write("profiles.json", content)
    report = calibrate(good_points(), Profile("x"), holdout=0.0)
    with pytest.raises(UsageError, match="--export"):
        export_profile(path, report, ["m.csv"])
    assert path.read_text() == content


# --- catalog files ($PLANNER_DATA_DIR may point at a user's own) -----------------------------

CATALOG = data_dir() / "catalog"


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("models.csv", lambda t: t.replace("name,", "nm,", 1), "missing column 'name'"),
        ("gpus.csv", lambda t: t.replace(",memory,", ",mem,", 1), "missing column 'memory'"),
        ("models.csv", lambda t: t.replace(",40,40,", ",40,0,", 1), "kv_heads = 0 must be"),
        ("models.csv", lambda t: t.replace(",40,40,", ",40,3,", 1), "kv_heads must divide"),
        ("models.csv", lambda t: t.replace(",40,40,", ",40.5,40,", 1), "must be whole"),
        ("gpus.csv", lambda t: t.replace("T4,Tesla T4,NVIDIA,16,", "T4,,NVIDIA,nan,", 1), "nan"),
        ("precisions.csv", lambda t: t.replace("bf16_tflops,", "x,", 1), "compute_peak"),
        ("precisions.csv", lambda t: "\udcff", "not a readable UTF-8 CSV file"),
    ],
)
def test_a_malformed_catalog_is_a_catalog_error(
    tmp_path: Path, name: str, edit: Callable[[str], str], message: str
) -> None:
    text = edit((CATALOG / name).read_text(encoding="utf-8"))
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    loader = {"gpus.csv": load_gpus, "models.csv": load_models, "precisions.csv": load_precisions}
    with pytest.raises(CatalogError, match=message):
        loader[name](path)


def test_the_bundled_catalog_passes_the_checks() -> None:
    assert len(load_gpus(CATALOG / "gpus.csv")) >= 11
    assert len(load_models(CATALOG / "models.csv")) >= 11
    assert len(load_precisions(CATALOG / "precisions.csv")) >= 5
