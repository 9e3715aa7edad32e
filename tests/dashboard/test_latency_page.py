"""The Latency model page on real stores: the numbers ``planner latency`` computes (through the
same library function) for the deployment the widgets describe, the memory breakdown and
latency-against-batch charts, a batch that does not fit as a result, a model that does not fit
as a located error, and the calibration profile in use with the error it states."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from planner.config import database_url
from planner.latency.predict import LatencyQuery, memory_breakdown
from planner.latency.registry import profile_accuracy
from planner.store import CalibrationProfile, open_store
from planner.store.calibrations import stored_accuracy
from planner.usecases.predict import predict_latency
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]


@contextmanager
def _store_session() -> Iterator[Session]:
    with open_store(database_url()) as store, store.session() as session:
        yield session


def _library(query: LatencyQuery) -> dict[str, Any]:
    """What ``planner latency --json`` prints for ``query`` on the page's store."""
    return predict_latency(query, _store_session).result


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _chart(at: AppTest, text: str) -> str:
    """The spec of the first chart whose spec holds ``text``."""
    specs = [c.proto.spec for c in at.get("plotly_chart") if text in c.proto.spec]
    assert specs, f"no chart with {text!r}"
    return str(specs[0])


def _set(at: AppTest, **values: Any) -> AppTest:
    """Set the page's widgets (``latency-<name>``) and rerun once."""
    for name, value in values.items():
        key = f"latency-{name}"
        if isinstance(value, str):
            at.selectbox(key=key).select(value)
        else:
            at.number_input(key=key).set_value(value)
    return at.run()


def test_the_page_shows_what_planner_latency_computes(empty_home: Path, page: Page) -> None:
    at = page("latency")
    no_exception(at)
    assert at.title[0].value == "Latency model"
    _set(
        at,
        gpu="L4",
        model="llama-3.1-8b",
        precision="fp8",
        engine="vllm",
        kv="fp8",
        batch=8,
        input=512,
        output=128,
    )
    no_exception(at)
    assert not at.error
    expected = _library(
        LatencyQuery(
            gpu="L4",
            model="llama-3.1-8b",
            precision="fp8",
            engine="vllm",
            kv_cache="fp8",
            batch=8,
            input_tokens=512,
            output_tokens=128,
            sim_requests=0,
        )
    )
    shown = _metrics(at)
    assert shown["TTFT (ms)"] == f"{expected['ttft_ms']:,.1f}"
    assert shown["TPOT (ms)"] == f"{expected['tpot_ms']:,.2f}"
    assert shown["E2E (ms)"] == f"{expected['e2e_ms']:,.0f}"
    assert shown["KV cache (tokens)"] == f"{expected['kv_capacity_tokens']:,}"
    assert shown["Max output tokens/s"] == (f"{expected['max_output_tokens_per_s']:,.0f}")
    assert shown["Max requests/s"] == f"{expected['max_requests_per_s']:,.2f}"
    assert expected["kv_cache"] == "fp8" and expected["engine"] == "vllm"
    # The memory breakdown: weights / activations / KV cache / free, in GiB per GPU.
    memory = _chart(at, "GPU memory")
    assert '"GiB"' in memory
    for part, gib in memory_breakdown(expected["memory"]).items():
        assert f"{part} {gib:,.1f} GiB" in memory
    # Latency against batch size, with the most sequences the KV cache holds marked.
    curve = _chart(at, "Latency against batch size")
    assert "TTFT (ms)" in curve and "TPOT (ms)" in curve and "batch size (sequences)" in curve
    most = expected["max_concurrent_sequences"]
    [label] = [a for a in json.loads(curve)["layout"]["annotations"] if "KV cache" in a["text"]]
    assert label["text"] == f"KV cache holds {most:,}"
    assert label["x"] == pytest.approx(math.log10(most))  # on the log axis, where the line is


def test_defaults_on_the_demo_store_are_the_engines(demo_home: Path, page: Page) -> None:
    at = page("latency")
    no_exception(at)
    assert not at.error
    # The page's defaults: H100-SXM, llama-3.1-8b, bf16, TP 1, TensorRT-LLM's KV cache and
    # memory share, batch 1, 1024 in / 256 out (the CLI's defaults).
    expected = _library(LatencyQuery(gpu="H100-SXM", model="llama-3.1-8b", sim_requests=0))
    assert _metrics(at)["TTFT (ms)"] == f"{expected['ttft_ms']:,.1f}"
    assert at.selectbox(key="latency-kv").value == "engine default"
    assert at.number_input(key="latency-memory").value is None  # the engine's share


def test_a_model_that_does_not_fit_is_a_located_error(demo_home: Path, page: Page) -> None:
    at = page("latency")
    _set(at, gpu="L4", model="llama-3.1-405b", precision="bf16")
    no_exception(at)
    [error] = at.error
    assert error.value.startswith("llama-3.1-405b in bf16 does not fit 1 x L4")
    assert "GiB per GPU" in error.value
    assert not at.metric  # no numbers for a deployment that cannot run


def test_tensor_parallelism_that_does_not_divide_the_heads_is_an_error(
    empty_home: Path, page: Page
) -> None:
    at = page("latency")
    _set(at, model="llama-3.1-70b", tp=3)
    no_exception(at)
    assert [e.value for e in at.error] == [
        "tensor parallelism 3 does not divide the 64 attention heads of llama-3.1-70b"
    ]


def test_a_batch_that_does_not_fit_is_saturation_not_an_error(empty_home: Path, page: Page) -> None:
    at = page("latency")
    _set(at, gpu="L4", model="llama-3.1-8b", batch=5000)
    no_exception(at)
    assert not at.error
    [warning] = at.warning
    expected = _library(LatencyQuery(gpu="L4", model="llama-3.1-8b", sim_requests=0))
    most = expected["max_concurrent_sequences"]
    assert "Saturated" in warning.value and f"at most {most:,} sequences" in warning.value
    shown = _metrics(at)
    assert shown["TTFT (ms)"] == "saturated"
    assert shown["KV cache (tokens)"] == f"{expected['kv_capacity_tokens']:,}"


def test_the_profile_in_use_and_its_stated_error(demo_home: Path, page: Page) -> None:
    at = page("latency")
    _set(at, gpu="H100-SXM")
    result = _library(LatencyQuery(gpu="H100-SXM", model="llama-3.1-8b", sim_requests=0))
    assert result["profile"] == "trtllm-default"  # fitted under load (docs/accuracy.md)
    profile = predict_latency(
        LatencyQuery(gpu="H100-SXM", model="llama-3.1-8b"), _store_session
    ).profile
    with _store_session() as session:
        accuracy = profile_accuracy(profile, stored_accuracy(session, profile.name))
    assert accuracy is not None and accuracy["origin"] == "bundled"
    said = " ".join(m.value for m in at.markdown)
    assert "Profile **trtllm-default** (trtllm), bundled with planner" in said
    shown = _metrics(at)
    assert shown["Held-out MAPE"] == f"{accuracy['heldout_test']['mape']:.1%}"
    assert shown["Fitted MAPE"] == f"{accuracy['after_all']['mape']:.1%}"
    errors = [d.value for d in at.dataframe if "MAPE" in d.value.columns]
    assert errors and set(errors[0]["points"]) == {"held out", "after fitting"}


def test_a_profile_fitted_into_the_store_wins_and_states_its_error(
    demo_home: Path, page: Page
) -> None:
    """`planner calibrate` stores a profile for (GPU, engine): the page uses it, as the CLI
    does, and shows the error stored with it."""
    report = {
        "points": 12,
        "heldout_test": {"points": 4, "mape": 0.0812, "worst_ape": 0.2, "by_metric": {}},
        "after_all": {"points": 12, "mape": 0.0611, "worst_ape": 0.15, "by_metric": {}},
    }
    with _store_session() as session:
        session.add(
            CalibrationProfile(
                name="mine-l4",
                engine="trtllm",
                gpu="L4",
                params={"compute_eff": 0.6, "memory_eff": 0.65},
                report=report,
                sources=["my-l4-runs.csv"],
            )
        )
    at = page("latency")
    _set(at, gpu="L4", model="llama-3.1-8b")
    no_exception(at)
    expected = _library(LatencyQuery(gpu="L4", model="llama-3.1-8b", sim_requests=0))
    assert expected["profile"] == "mine-l4"
    shown = _metrics(at)
    assert shown["TTFT (ms)"] == f"{expected['ttft_ms']:,.1f}"
    assert shown["Held-out MAPE"] == "8.1%"
    assert shown["Fitted MAPE"] == "6.1%"
    said = " ".join(m.value for m in at.markdown)
    assert "Profile **mine-l4** (trtllm), stored in this store" in said
    assert "my-l4-runs.csv" in said


def test_a_load_beyond_capacity_is_a_result(empty_home: Path, page: Page) -> None:
    at = page("latency")
    _set(at, gpu="L4", model="llama-3.1-8b", qps=50.0)
    no_exception(at)
    assert not at.error
    expected = _library(LatencyQuery(gpu="L4", model="llama-3.1-8b", qps=50.0, sim_requests=0))
    loaded = expected["under_load"]
    assert loaded["saturated"]
    warnings = " ".join(w.value for w in at.warning)
    assert f"capacity is about {loaded['capacity_qps']:g} requests/s" in warnings
