"""The Benchmarks & calibration page: stored benchmark runs (a table, one run's latency
distributions, its predictions against its measurements) above the calibration profiles (the
bundled and stored ones with their stated errors)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from planner.bench.client import RequestShape, Target
from planner.bench.importers import import_result
from planner.bench.loadgen import LoadPlan, run_load
from planner.bench.metrics import RequestRecord, summarize
from planner.bench.results import (
    BenchRun,
    Load,
    RunInfo,
    Stats,
    measurement_rows,
    write_measurements,
)
from planner.bench.server import BenchServer, ModelEngine, ServerThread
from planner.latency.calibration import predict, read_measurements
from planner.latency.catalog import load_catalog
from planner.latency.engines import get_engine
from planner.latency.profile import Profile, load_bundled_profiles
from planner.latency.registry import all_profiles, engine_profile
from planner.store import CalibrationProfile, open_store
from planner.store.bench_runs import save_run
from tests.conftest import ROOT
from tests.dashboard.conftest import no_exception, open_page

RESULTS = ROOT / "tests" / "fixtures" / "bench-results"
SPEED = 100.0  # the stand-in server runs 100 times faster than the model predicts


def _texts(elements: Iterable[Any]) -> str:
    return " ".join(str(e.value) for e in elements)


def _store_url(home: Path) -> str:
    return f"sqlite:///{home / 'planner.db'}"


def _frames(at: AppTest, column: str) -> list[Any]:
    return [d.value for d in at.dataframe if column in d.value.columns]


def measured_run() -> tuple[BenchRun, list[RequestRecord]]:
    """Twelve requests, one at a time, measured over loopback against the stand-in server
    timing its tokens for llama-3.1-8b on an L4 (bf16, vLLM)."""
    engine = ModelEngine("L4", "llama-3.1-8b", "bf16", speed=SPEED)
    plan = LoadPlan(pattern="sync", max_requests=12, max_seconds=60.0, warmup=1)
    shape = RequestShape(input_tokens=64, output_tokens=16)
    with ServerThread(BenchServer(engine, model_name=engine.model_name, port=0)) as server:
        target = Target(server.url, "completions", server.model_name)
        result = asyncio.run(run_load(target, shape, plan, timeout=10.0))
    summary = summarize(result.records, result.duration)

    def stats(name: str) -> Stats:
        keys = ("mean", "median", "std", "p50", "p90", "p99")
        return Stats(**{k: summary[f"{k}_{name}_ms"] for k in keys})

    completed = summary["completed"]
    run = BenchRun(
        ttft=stats("ttft"),
        tpot=stats("tpot"),
        itl=stats("itl"),
        e2el=stats("e2el"),
        completed=completed,
        failed=summary["failed"],
        duration=summary["duration"],
        request_throughput=summary["request_throughput"],
        output_throughput=summary["output_throughput"],
        total_token_throughput=summary["total_token_throughput"],
        total_input_tokens=summary["total_input_tokens"],
        total_output_tokens=summary["total_output_tokens"],
        input_len=summary["total_input_tokens"] / completed,
        output_len=summary["total_output_tokens"] / completed,
        info=RunInfo(
            tool="planner bench run",
            tool_version=None,
            source_file="",
            source_format="planner bench run",
            benchmark=0,
            load=Load("concurrency", 1.0),
            gpu="L4",
            gpu_count=1,
            engine="vllm",
            model="llama-3.1-8b",
            precision="bf16",
            tp=1,
        ),
    )
    return run, result.records


@pytest.fixture(scope="module")
def measured() -> tuple[BenchRun, list[RequestRecord]]:
    return measured_run()


def test_an_empty_store_says_how_to_make_runs_and_lists_the_bundled_profiles(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    at = page("bench")
    no_exception(at)
    said = _texts(at.info)
    assert "No benchmark runs in this store yet" in said
    assert "planner bench run" in said and "planner bench import" in said
    assert "planner calibrate" in said
    assert not at.get("plotly_chart")
    bundled = load_bundled_profiles()
    [table] = _frames(at, "held-out MAPE")
    assert list(table["profile"]) == [p.name for p in bundled]
    assert list(table["engine"]) == [p.engine for p in bundled]
    [params] = _frames(at, "compute_eff")
    assert list(params["compute_eff"]) == [p.compute_eff for p in bundled]


def test_benchmarks_lists_profiles_fitted_into_the_store(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    fitted = Profile("my-h100", engine="trtllm", gpu="H100-SXM", compute_eff=0.61)
    with open_store(_store_url(empty_home)) as store, store.session() as session:
        session.add(
            CalibrationProfile(
                name=fitted.name,
                engine=fitted.engine,
                gpu=fitted.gpu,
                params=fitted.params(),
                report={"points": 12, "heldout_test": {"points": 4, "mape": 0.125}},
                sources=["measurements.csv"],
            )
        )
    at = page("bench")
    no_exception(at)
    assert "No profile fitted into this store yet" not in _texts(at.info)
    [stored] = [t for t in _frames(at, "fitted at") if len(t) == 1]
    assert stored.loc[0, "profile"] == "my-h100"
    assert stored.loc[0, "GPU"] == "H100-SXM"
    assert stored.loc[0, "held-out MAPE"] == 0.125
    assert stored.loc[0, "sources"] == "measurements.csv"


def test_a_measured_run_shows_its_table_distributions_and_predictions(
    empty_home: Path,
    page: Callable[[str], AppTest],
    measured: tuple[BenchRun, list[RequestRecord]],
    tmp_path: Path,
) -> None:
    run, records = measured
    with open_store(_store_url(empty_home)) as store, store.session() as session:
        save_run(session, run, records, name="l4-sync")
    at = page("bench")
    no_exception(at)

    [runs] = _frames(at, "mean TTFT (ms)")
    row = runs.iloc[0]
    assert (row["name"], row["source"], row["hardware"], row["load"]) == (
        "l4-sync",
        "measured",
        "L4",
        "sync",
    )
    assert row["completed"] == run.completed == 12
    assert row["mean TTFT (ms)"] == pytest.approx(run.ttft.mean)
    assert row["p99 E2E (ms)"] == pytest.approx(run.e2el.p99)

    [cdf] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "CDF" in c.proto.spec]
    traces = {t["name"]: t for t in cdf["data"]}
    assert set(traces) == {"TTFT", "TPOT", "E2E latency"}
    ttfts = sorted(r.ttft_s * 1000 for r in records if r.ok and r.ttft_s is not None)
    assert traces["TTFT"]["x"] == pytest.approx(ttfts)
    assert traces["TTFT"]["y"][-1] == 1.0

    # The predictions are calibration.predict's for each measurement, under the engine's
    # default profile.
    [compared] = _frames(at, "predicted")
    path = tmp_path / "rows.csv"
    write_measurements(measurement_rows([run]), path)
    points, _ = read_measurements(path)
    catalog = load_catalog()
    profile = engine_profile(all_profiles(), "L4", get_engine("vllm"), None)
    ttft = next(p for p in points if p.metric == "ttft")
    expected = predict(ttft, profile, catalog)
    [shown] = compared[compared["metric"] == "TTFT"].to_dict("records")
    assert shown["predicted"] == pytest.approx(expected)
    assert shown["measured"] == pytest.approx(ttft.value) == pytest.approx(run.ttft.mean)
    assert shown["error %"] == pytest.approx(100 * (expected / ttft.value - 1))
    assert set(compared["metric"]) == {
        "TTFT",
        "TPOT",
        "E2E latency",
        "output throughput",
        "request throughput",
    }
    errors = compared["error %"].abs()
    mape = next(m for m in at.metric if m.label.startswith("Mean absolute error"))
    assert mape.value == f"{errors.mean():.1f}%"
    assert math.isfinite(errors.mean())
    assert any("Predicted against measured" in c.proto.spec for c in at.get("plotly_chart"))


def test_a_run_on_hardware_the_catalog_lacks_says_which_name_is_unknown(
    empty_home: Path, page: Callable[[str], AppTest]
) -> None:
    [run] = import_result(RESULTS / "vllm-bench-serve-0.32.0_c4.json", engine="vllm")
    with open_store(_store_url(empty_home)) as store, store.session() as session:
        save_run(session, run, name="cpu-run")
    at = page("bench")
    no_exception(at)
    [runs] = _frames(at, "mean TTFT (ms)")
    assert list(runs["name"]) == ["cpu-run"] and runs.iloc[0]["source"] == "imported-vllm"
    warned = _texts(at.warning)
    assert "cannot predict this run" in warned and "'CPU-2core'" in warned
    assert not _frames(at, "predicted")
    assert "no per-request rows" in _texts(at.info)
    assert not at.error


def test_a_link_opens_the_page_on_its_run(
    empty_home: Path, measured: tuple[BenchRun, list[RequestRecord]]
) -> None:
    run, records = measured
    [imported] = import_result(RESULTS / "vllm-bench-serve_catalog-metadata.json")
    with open_store(_store_url(empty_home)) as store, store.session() as session:
        save_run(session, run, records, name="l4-sync")
        save_run(session, imported, name="h100-poisson")
    at = open_page("bench")
    assert at.selectbox(key="bench-run").value == "h100-poisson"  # the newest
    at.query_params["run"] = "l4-sync"
    at.run()
    no_exception(at)
    assert at.selectbox(key="bench-run").value == "l4-sync"
