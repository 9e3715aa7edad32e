from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from planner.errors import InputFileError, PlannerError
from planner.latency.calibration import (
    REQUIRED_COLUMNS,
    CalibrationReport,
    Excluded,
    Measurement,
    calibrate,
    deployment_of,
    fit,
    fitted_params,
    predict,
    read_measurements,
    select,
    split_points,
)
from planner.latency.catalog import load_catalog
from planner.latency.engines import deploy
from planner.latency.model import LatencyModel
from planner.latency.operators import read_operator_points
from planner.latency.profile import FIT_BOUNDS, Profile
from planner.latency.serving import LoadKind, max_throughput, steady_state
from planner.paths import data_dir
from tests.conftest import WriteFile

PUBLISHED = data_dir() / "reference" / "published_latency.csv"
# The accuracy docs/latency-model.md states for the default profiles: median absolute error on
# held-out points (fitted without them) and after fitting, over throughput and latency points.
BOUND = 0.10
METRIC_BOUND = 0.15  # per metric (TTFT, TPOT, output throughput)

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD_ROW = "Llama-3.1-8B,H100 80GB HBM3,1,BF16,467,256,QPS=2,mean_TTFT,23.0,ms"


# --- the published measurements ------------------------------------------------------------


@pytest.fixture(scope="module")
def published() -> tuple[list[Measurement], list[Excluded]]:
    return read_measurements(PUBLISHED)


def engine_report(
    published: tuple[list[Measurement], list[Excluded]],
    engine: str,
    *,
    gpu: str | None = None,
    vendor: str | None = None,
    operators: bool = True,
) -> CalibrationReport:
    """The fit `make profiles` runs for one engine's default profile."""
    points, excluded = published
    chosen = select(points, engine=engine, gpu=gpu, vendor=vendor)
    kernels = read_operator_points() if operators else []
    start = Profile("t", engine, gpu)
    return calibrate(chosen, start, excluded=excluded, holdout=0.3, operators=kernels)


@pytest.fixture(scope="module")
def report(published: tuple[list[Measurement], list[Excluded]]) -> CalibrationReport:
    return engine_report(published, "trtllm")


def test_published_file_reads_134_points_and_excludes_the_2_bursts(
    published: tuple[list[Measurement], list[Excluded]],
) -> None:
    points, excluded = published
    assert len(points) == 134
    assert [e.row for e in excluded] == [15, 16]  # the QPS=INF rows (lines 16 and 17)
    assert all("infinite rate" in e.reason for e in excluded)
    # keys identify points (the split hashes them), except where two published versions of
    # one configuration were both kept (the README names them)
    assert len({p.key for p in points}) >= 0.9 * len(points)


def test_published_names_resolve_to_catalog_names(
    published: tuple[list[Measurement], list[Excluded]],
) -> None:
    points, _ = published
    c = load_catalog()
    assert {"H100-SXM", "L40S", "A100-80GB", "H200", "B200", "GH200-96GB", "MI300X"} <= {
        p.gpu for p in points
    }
    assert {p.engine for p in points} == {"trtllm", "vllm", "sglang"}
    assert {p.precision for p in points} == {"fp8", "fp16", "bf16", "fp4"}
    assert {p.metric for p in points} == {"ttft", "tpot", "e2e", "output_throughput"}
    assert {p.load_kind for p in points} == {"batch", "qps", "concurrency", "max"}
    for p in points:
        assert c.gpus.get(p.gpu).name == p.gpu
        assert c.models.get(p.model).name == p.model
        assert c.precisions.get(p.precision).name == p.precision
    nim = [p for p in points if p.model == "llama-3.1-70b" and p.tp == 2 and p.load_kind != "max"]
    assert len(nim) == 8 and all(p.kv_cache == "fp8" for p in nim)  # the NIM Llama-3.3-70B rows
    assert all(p.engine == "vllm" for p in points if p.gpu == "MI300X")  # ROCm vLLM
    first = points[0]
    assert first.key == "llama-2-7b/H100-SXMx1/fp8/128:1/batch=1/ttft"
    assert first.value == 7.0 and first.engine == "trtllm"
    assert first.source.startswith("TensorRT-LLM performance.md")


def test_predict_models_the_measured_deployment_and_load(
    published: tuple[list[Measurement], list[Excluded]],
) -> None:
    points, _ = published
    point = next(p for p in points if p.load_kind == "concurrency" and p.load == 50)
    assert point.key == "llama-3.1-70b/H100-SXMx2/fp8/5000:500/concurrency=50/ttft"
    c = load_catalog()
    deployment = deploy(
        "trtllm",
        c.gpus.get("H100-SXM"),
        c.models.get("llama-3.1-70b"),
        c.precisions.get("fp8"),
        2,
        kv_cache="fp8",  # the row's kv_cache
    )
    profile = Profile("t")
    expected = steady_state(LatencyModel(deployment, profile), 5000, 500, "concurrency", 50)
    assert predict(point, profile) == pytest.approx(expected.ttft_ms, rel=1e-12)
    tpot = replace(point, metric="tpot")
    assert predict(tpot, profile) == pytest.approx(expected.tpot_ms, rel=1e-12)
    assert predict(replace(point, metric="e2e"), profile) == pytest.approx(
        expected.e2e_ms, rel=1e-12
    )
    # one client: an FP16 KV cache reads twice the bytes per context token, slower decode steps
    alone = replace(tpot, load=1.0)
    assert predict(replace(alone, kv_cache="fp16"), profile) > predict(alone, profile)
    # an offline maximum-throughput row is priced by max_throughput
    offline = next(p for p in points if p.load_kind == "max" and p.engine == "trtllm")
    most = max_throughput(
        LatencyModel(deployment_of(offline, load_catalog()), profile), *_shape(offline)
    )
    assert predict(offline, profile) == pytest.approx(most["output_tokens_per_s"], rel=1e-12)


def _shape(point: Measurement) -> tuple[int, int]:
    return point.input_tokens, point.output_tokens


def test_calibration_meets_the_stated_bound_on_held_out_points(report: CalibrationReport) -> None:
    summary: dict[str, Any] = report.summary()
    heldout = summary["heldout_test"]
    assert heldout["points"] == len(report.test_keys) > 20
    assert heldout["median_ape"] <= BOUND
    for metric in ("ttft", "output_throughput"):
        assert heldout["by_metric"][metric]["median_ape"] <= METRIC_BOUND, metric


def test_calibration_improves_on_the_start_and_meets_the_bound_after_fitting(
    report: CalibrationReport,
) -> None:
    summary: dict[str, Any] = report.summary()
    after, before = summary["after_all"], summary["before_all"]
    assert after["median_ape"] <= BOUND * 1.1
    for metric in ("ttft", "tpot", "output_throughput"):
        assert after["by_metric"][metric]["median_ape"] <= METRIC_BOUND, metric
    assert after["median_ape"] < before["median_ape"]
    # the fitted profile stays inside the bounds and keeps the start's identity
    assert report.profile.name == "t"
    for name, (low, high) in FIT_BOUNDS.items():
        assert low <= getattr(report.profile, name) <= high, name


def test_operator_timings_are_predicted_within_their_stated_errors(
    report: CalibrationReport,
) -> None:
    """docs/latency-model.md's operator table: the GEMMs within 16% per token bucket (they were
    -29% to +29% with one efficiency), decode attention within 10% where it is measured
    densely (it was -29%); prefill attention depends on the kernel (FlashAttention vs
    FlashInfer differ 3x), so only its median over both is bounded."""
    rows = {(r.gpu, r.family, r.bucket): r for r in report.operators_after}
    for (gpu, family, bucket), row in rows.items():
        if family == "linear":
            assert row.median_abs_pct <= 16, (gpu, bucket, row)
    assert rows[("A100-80GB", "attn_decode", "<=128")].median_abs_pct <= 10
    assert rows[("A100-80GB", "attn_prefill", "129-511")].median_abs_pct <= 10
    assert rows[("A100-80GB", "attn_prefill", ">=512")].median_abs_pct <= 45
    before = {(r.gpu, r.family, r.bucket): r for r in report.operators_before}
    assert before.keys() == rows.keys()


def test_other_engines_fit_their_own_measurements(
    published: tuple[list[Measurement], list[Excluded]],
) -> None:
    """MI300X results are ROCm vLLM's, fitted as their own profile; SGLang's are its own."""
    mi300x = engine_report(published, "vllm", gpu="MI300X", operators=False).summary()
    assert mi300x["heldout_test"]["median_ape"] <= BOUND
    assert mi300x["after_all"]["median_ape"] <= BOUND
    sglang = engine_report(published, "sglang").summary()
    assert sglang["heldout_test"]["median_ape"] <= 0.16  # 4 held-out points: 15.2% reached
    assert sglang["after_all"]["median_ape"] <= METRIC_BOUND


def test_report_lists_every_point_with_its_split(report: CalibrationReport) -> None:
    summary: dict[str, Any] = report.summary()
    rows = summary["per_point"]
    assert len(rows) == summary["points"] == len(report.points)
    assert {r["split"] for r in rows} == {"train", "test"}
    assert {r["key"] for r in rows if r["split"] == "test"} == report.test_keys
    assert round(len({p.key for p in report.points}) * 0.3) == len(report.test_keys)
    assert {r["unit"] for r in rows} == {"ms", "tok/s"}
    assert [e["row"] for e in summary["excluded"]] == [15, 16]  # the QPS=INF bursts
    groups = summary["by_group"]
    assert sum(g["points"] for g in groups) == len(report.points)
    assert {g["engine"] for g in groups} == {"trtllm"}


def test_every_point_read_is_fitted_or_reported_excluded(
    published: tuple[list[Measurement], list[Excluded]], report: CalibrationReport
) -> None:
    points, excluded = published
    trtllm = [p for p in points if p.engine == "trtllm"]
    assert len(report.points) + len(report.excluded) == len(trtllm) + len(excluded)


def test_split_is_deterministic_and_sized(
    published: tuple[list[Measurement], list[Excluded]],
) -> None:
    points, _ = published
    assert split_points(points, 0.3) == split_points(list(reversed(points)), 0.3)
    keys = {p.key for p in points}
    assert len(split_points(points, 0.3)) == round(len(keys) * 0.3)
    assert split_points(points, 0.0) == set()
    with pytest.raises(PlannerError, match="expected a fraction"):
        split_points(points, 1.0)


# --- a fit recovers a known profile --------------------------------------------------------

# Serving measurements fit the serving-level parameters; the kernel efficiencies keep the
# start's values without operator timings, so the truth shares them.
TRUTH = Profile(
    "truth",
    compute_eff=0.42,
    memory_eff=0.66,
    iteration_overhead_ms=3.1,
    request_overhead_ms=7.0,
    allreduce_us=12.0,
)

# (model, gpu, precision, tp, kv_cache)
DEPLOYMENTS = [
    ("llama-3.1-8b", "H100-SXM", "bf16", 1, "fp16"),
    ("llama-2-7b", "A100-80GB", "fp16", 1, "fp16"),
    ("llama-3.1-70b", "H100-SXM", "bf16", 4, "fp16"),
    ("llama-3.1-70b", "H200", "fp8", 2, "fp8"),
    ("mixtral-8x7b", "H100-SXM", "bf16", 2, "fp16"),
]
SHAPES = [(128, 128), (2048, 64), (512, 1024)]
LOADS: list[tuple[LoadKind, float]] = [("batch", 1), ("batch", 16), ("qps", 1), ("concurrency", 8)]


def synthetic_points() -> list[Measurement]:
    points = []
    for (model, gpu, precision, tp, kv), (inp, out), (kind, load), metric in itertools.product(
        DEPLOYMENTS, SHAPES, LOADS, ("ttft", "tpot")
    ):
        shape = Measurement(
            gpu=gpu,
            model=model,
            precision=precision,
            tp=tp,
            engine="trtllm",
            kv_cache=kv,
            input_tokens=inp,
            output_tokens=out,
            load_kind=kind,
            load=load,
            metric=metric,
            value=1.0,
        )
        value = predict(shape, TRUTH)
        points.append(replace(shape, value=value))  # measured = the truth's prediction
    return points


def test_fit_recovers_a_known_profile_from_its_own_predictions() -> None:
    points = synthetic_points()
    assert len(points) == 5 * 3 * 4 * 2
    assert any(p.tp > 1 for p in points) and any(p.tp == 1 for p in points)
    params = fitted_params(points)
    assert "allreduce_us" in params and "fp8_gemm_scale" not in params  # H200 only has fp8
    start = Profile("truth")
    fitted = fit(points, start)
    # the points are reproduced, and the parameters that decide them are recovered
    predicted = [predict(p, fitted) for p in points]
    assert all(
        got == pytest.approx(p.value, rel=0.01) for got, p in zip(predicted, points, strict=True)
    )
    for name in params:
        assert getattr(fitted, name) == pytest.approx(getattr(TRUTH, name), rel=0.05), name
    assert fitted.comm_eff == TRUTH.comm_eff  # not fitted


def test_fit_needs_at_least_as_many_points_as_parameters() -> None:
    points = synthetic_points()[:3]
    with pytest.raises(PlannerError, match="3 measurements cannot fit 4 parameters"):
        fit(points, Profile("t"))


# --- bad measurement files -----------------------------------------------------------------


def test_missing_column_is_named(write: WriteFile) -> None:
    header = HEADER.replace(",metric", "")
    row = GOOD_ROW.replace(",mean_TTFT", "")
    path = write("m.csv", f"{header}\n{row}\n")
    with pytest.raises(InputFileError, match="missing required column 'metric'") as info:
        read_measurements(path)
    assert str(path) in str(info.value)


def test_bad_unit_names_row_line_and_column(write: WriteFile) -> None:
    bad = GOOD_ROW.replace(",ms", ",minutes")
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW}\n{bad}\n")
    with pytest.raises(InputFileError) as info:
        read_measurements(path)
    problem = info.value.problem
    assert (problem.row, problem.line, problem.column) == (2, 3, "unit")
    assert str(info.value) == (
        f"{path}: row 2, line 3, column 'unit': expected ms or s for ttft, got 'minutes'"
    )


def test_unknown_gpu_names_the_row_and_the_closest_gpu(write: WriteFile) -> None:
    bad = GOOD_ROW.replace("H100 80GB HBM3", "H100-SMX")
    path = write("m.csv", f"{HEADER}\n{bad}\n")
    with pytest.raises(InputFileError) as info:
        read_measurements(path)
    problem = info.value.problem
    assert (problem.row, problem.line, problem.column) == (1, 2, "gpu")
    assert "row 1, line 2, column 'gpu'" in str(info.value)
    assert "unknown GPU 'H100-SMX'; known GPUs: H100-SXM, " in str(info.value)


@pytest.mark.parametrize(
    ("replace", "by", "column", "message"),
    [
        ("mean_TTFT", "P99_TTFT", "metric", "expected TTFT, ITL, TPOT or E2E"),
        ("QPS=2", "QPS=lots", "batch_or_concurrency", "positive number of qps, got 'QPS=lots'"),
        ("QPS=2", "users=2", "batch_or_concurrency", "expected 1, QPS=N, concurrency=N"),
        ("23.0", "-4", "value", "expected a positive latency"),
        ("23.0", "fast", "value", "expected a number, got 'fast'"),
        (",1,BF16", ",two,BF16", "num_gpus", "expected a power of two from 1 to 8, got 'two'"),
        (
            ",467,",
            ",467.5,",
            "input_len",
            "expected a whole number of tokens, at least 1, got '467.5'",
        ),
        ("Llama-3.1-8B", "Llama-9", "model", "unknown model 'Llama-9'"),
        ("BF16", "FP6", "precision", "unknown precision 'FP6'"),
        ("BF16", "FP4", "precision", "no FP4 tensor-core peak"),
    ],
)
def test_other_bad_values_name_their_column(
    write: WriteFile, replace: str, by: str, column: str, message: str
) -> None:
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW.replace(replace, by)}\n")
    with pytest.raises(InputFileError, match=message) as info:
        read_measurements(path)
    assert info.value.problem.column == column


@pytest.mark.parametrize("load", ["0", "-2", "concurrency=-3", "QPS=0"])
def test_non_positive_loads_are_refused(write: WriteFile, load: str) -> None:
    path = write("m.csv", f"{HEADER}\n{GOOD_ROW.replace('QPS=2', load)}\n")
    with pytest.raises(InputFileError) as info:
        read_measurements(path)
    assert info.value.problem.column == "batch_or_concurrency"


def test_good_file_with_units_in_seconds(write: WriteFile) -> None:
    seconds = GOOD_ROW.replace("23.0,ms", "0.023,s").replace("mean_TTFT", "E2E")
    path = write("m.csv", f"{HEADER}\n{seconds}\n")
    points, excluded = read_measurements(path)
    assert excluded == []
    assert len(points) == 1
    (p,) = points
    assert (p.gpu, p.model, p.precision, p.metric) == ("H100-SXM", "llama-3.1-8b", "bf16", "e2e")
    assert p.value == pytest.approx(23.0, rel=1e-12)
    assert (p.load_kind, p.load) == ("qps", 2.0)
    # defaults when the columns are absent: TensorRT-LLM, and its KV cache for bf16 weights
    assert (p.engine, p.kv_cache) == ("trtllm", "fp16")


def test_missing_file_is_an_input_file_error(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.csv"
    with pytest.raises(InputFileError, match="file not found") as info:
        read_measurements(path)
    assert str(path) in str(info.value)
