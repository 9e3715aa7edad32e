"""planner's numbers for AIConfigurator's own configurations (``benchmarks/
aiconfigurator_compare.py``, docs/latency-model.md "Checked against AIConfigurator"): pinned, so
a change to the latency model or the simulator that moves them shows here and the docs' table
is rerun. 400 requests each (the benchmark runs ten minutes of each); Poisson arrivals at the
request rate AIConfigurator predicts for the configuration."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


compare = _load("aiconfigurator_compare")

# (case, mode): our layout, mean TTFT ms, mean TPOT ms (400 requests, seed 0)
PINNED = {
    ("meta-llama-3.1-70b_h200_sxm_4000_500", "agg"): ("2 x TP4 bs28", 10316.37, 39.02),
    ("meta-llama-3.1-70b_h200_sxm_4000_500", "disagg"): (
        "4P TP1 + 1D TP4 bs128",
        1079.19,
        31.088,
    ),
    ("meta-llama-3.1-8b_h200_sxm_4000_500", "agg"): ("8 x TP1 bs80", 116.1, 21.231),
    ("qwen3-30b-a3b_h200_sxm_4000_500", "agg"): ("4 x TP2 EP bs80", 1364.49, 27.529),
}


def _row(case: str, mode: str) -> dict[str, str]:
    return next(
        r
        for r in compare.rows()
        if r["case_id"] == case and r["kind"] == "search" and r["mode"] == mode
    )


@pytest.mark.parametrize(("case", "mode"), list(PINNED))
def test_our_numbers_for_aiconfigurators_configurations(case: str, mode: str) -> None:
    layout, ttft_ms, tpot_ms = PINNED[(case, mode)]
    ours = compare.ours_for(_row(case, mode), 400)
    assert ours["layout"] == layout
    assert ours["finished"] == ours["requests"] == 400
    assert ours["ttft_mean_ms"] == pytest.approx(ttft_ms, rel=0.02)
    assert ours["tpot_mean_ms"] == pytest.approx(tpot_ms, rel=0.02)


def test_where_the_two_disagree_on_the_70b_is_stated() -> None:
    # AIConfigurator's aggregated 2 x TP4 at batch 28 serves 3.67 req/s at TPOT 29 ms; in our
    # model its batch of 28 cannot: prefills in the batch stretch TPOT to about 39 ms, each
    # request then holds a slot for longer and the queue grows (mean TTFT in seconds)
    agg = compare.ours_for(_row("meta-llama-3.1-70b_h200_sxm_4000_500", "agg"), 400)
    assert agg["aic_tpot_ms"] < 30 < agg["tpot_mean_ms"]
    assert agg["ttft_mean_ms"] > 5 * agg["aic_ttft_ms"]
    # its disaggregated pick is within reach: TPOT near its 29 ms, TTFT of the same order
    dis = compare.ours_for(_row("meta-llama-3.1-70b_h200_sxm_4000_500", "disagg"), 400)
    assert dis["tpot_mean_ms"] == pytest.approx(dis["aic_tpot_ms"], rel=0.15)
    assert 0.3 < dis["ttft_mean_ms"] / dis["aic_ttft_ms"] < 3
