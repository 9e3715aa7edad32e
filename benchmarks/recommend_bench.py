"""Benchmark: a full recommendation for a one-week hourly demand curve.

Demand: the first week of ServeGen's m-small request rates (hourly), scaled to a 30 req/s peak;
request lengths from the bundled Azure conversation sample; prices from the bundled
multi-cloud snapshot; the default search space for llama-3.1-8b (every instance type x
precision x TP x max sequences x chunked prefill the catalog allows). Timed: candidate
enumeration + analytic screen, and verification of the 20 cheapest (plus the cheapest of every
other GPU type) by simulating the peak hour and each fleet's busiest hour; then the winner's
tightening and load-growth check. Target: at least 1,000 configurations screened and the top
20 verified in under 60 s on the 2-core machine.

``--compare-api`` times the same search with the per-token API comparison on (``api="allow"``
with the bundled API price snapshot, as ``planner recommend`` passes the prices in force of a
fresh store) against off (``api="never"``), alternating ``--rounds`` pairs, and times the API
step itself inside each "on" run: the offers, ``self_hosted_usd`` (setup and each evaluation)
and ``break_even``. The API overflow plan (extra simulations) is off unless ``--api-overflow``.

    python benchmarks/recommend_bench.py [--workers 2] [--serial] [--compare-api] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from planner.recommend import api as api_module
from planner.recommend import engine
from planner.recommend.engine import recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from pricing.api import load_api_snapshot
from pricing.snapshot import load_snapshot

ROOT = Path(__file__).resolve().parent.parent
SERVEGEN = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
SAMPLE = ROOT / "data" / "samples" / "azure_llm_conv_2023.csv.gz"
TARGET_S = 60.0
PEAK_RPS = 30.0


def week_demand() -> Demand:
    rates = pd.read_csv(SERVEGEN)
    small = rates[rates["model"] == "m-small"]
    hourly = small.groupby(small["window_start_s"] // 3600)["requests_in_window"].sum()
    per_hour = hourly.to_numpy(np.float64)[:168].copy()
    per_hour *= PEAK_RPS * 3600 / per_hour.max()
    lengths = pd.read_csv(SAMPLE)
    return Demand(
        RateCurve(pd.Timestamp("2025-01-06", tz="UTC").to_pydatetime(), per_hour),
        lengths["ContextTokens"].to_numpy(np.int64),
        lengths["GeneratedTokens"].to_numpy(np.int64),
        "ServeGen m-small week, 30 req/s peak",
    )


@contextmanager
def api_timings() -> Iterator[dict[str, float]]:
    """Time the API step of a search from outside: the engine's ``_api_choice`` (offers,
    comparison, break-even, chart curve) and, within it, the self-hosted cost
    (``SelfHostedCost``: its setup, and every evaluation it computes rather than remembers)
    and ``break_even``. The engine and planner.recommend.api look these names up at call time,
    so wrapping the module and class attributes times the real calls."""
    took = {"api_s": 0.0, "setup_s": 0.0, "cost_s": 0.0, "cost_calls": 0, "break_even_s": 0.0}
    choice, even = engine._api_choice, api_module.break_even
    cost = api_module.SelfHostedCost
    setup, evaluate = cost.__init__, cost._at

    def timed_choice(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return choice(*args, **kwargs)
        finally:
            took["api_s"] += time.perf_counter() - began

    def timed_setup(self: Any, *args: Any, **kwargs: Any) -> None:
        began = time.perf_counter()
        setup(self, *args, **kwargs)
        took["setup_s"] += time.perf_counter() - began

    def timed_at(self: Any, factor: float) -> float:
        began = time.perf_counter()
        try:
            return evaluate(self, factor)
        finally:
            took["cost_s"] += time.perf_counter() - began
            took["cost_calls"] += 1

    def timed_even(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return even(*args, **kwargs)
        finally:
            took["break_even_s"] += time.perf_counter() - began

    engine._api_choice = timed_choice
    cost.__init__ = timed_setup  # type: ignore[method-assign]
    cost._at = timed_at  # type: ignore[method-assign]
    api_module.break_even = timed_even
    try:
        yield took
    finally:
        engine._api_choice = choice
        cost.__init__ = setup  # type: ignore[method-assign]
        cost._at = evaluate  # type: ignore[method-assign]
        api_module.break_even = even


def once(
    workers: int,
    dask: str | None = None,
    disaggregation: str = "auto",
    *,
    api: str | None = None,
    api_overflow: bool = False,
) -> dict[str, Any]:
    """One search; ``api`` None as before (no API prices passed: no API step), else the API
    comparison's mode with the bundled API prices passed."""
    request = Request(
        week_demand(),
        Targets({"default": SLO(ttft_s=2.0, tpot_s=0.2)}),
        Constraints(model="llama-3.1-8b"),
        SearchOptions(
            verify_top=20,
            workers=workers,
            dask=dask,
            disaggregation=disaggregation,
            api=api or "allow",
            api_overflow=api_overflow,
        ),
    )
    prices = load_snapshot()
    api_prices = load_api_snapshot() if api is not None else None
    with api_timings() as took:
        began = time.perf_counter()
        result = recommend(request, prices, api_prices=api_prices)
        total = time.perf_counter() - began
    stats = result.stats
    winner = result.winner or {}
    arch = result.architecture or {}
    return {
        "workers": workers,
        "disaggregation": disaggregation,
        "architecture": arch.get("winner"),
        "pairs_screened": arch.get("pairs_screened"),
        "pairs_verified": len(arch.get("pairs_verified") or []),
        "runner": stats["runner"],
        "configurations": stats["candidates"],
        "screened": stats["screened"],
        "verified": stats["verified"],
        "simulations": stats["simulations"],
        "screen_s": round(stats["screen_s"], 2),
        "verify_s": round(stats["verify_s"], 2),
        "refine_s": round(total - stats["screen_s"] - stats["verify_s"], 2),
        "screen_and_verify_s": round(stats["screen_s"] + stats["verify_s"], 2),
        "total_s": round(total, 2),
        "screened_per_s": round(stats["screened"] / stats["screen_s"]),
        "winner": f"{winner.get('instance_type')} {winner.get('precision')} TP{winner.get('tp')}",
        "winner_monthly_usd": round(winner.get("monthly_usd", 0.0)),
        "api": api or "not passed",
        "api_overflow": api_overflow,
        "api_step": {k: round(v, 4) if isinstance(v, float) else v for k, v in took.items()},
        "api_choice": _api_summary(result.api),
    }


def _api_summary(found: dict[str, Any] | None) -> dict[str, Any] | None:
    if not found:
        return None
    even = found.get("break_even") or {}
    offer = found.get("offer") or {}
    return {
        "choice": found["choice"],
        "offers": len(found["offers"]),
        "best": f"{offer.get('provider')} {offer.get('offer')}",
        "api_monthly_usd": round(found["api_monthly_usd"] or 0.0),
        "break_even_load_factor": even.get("load_factor"),
        "curve_points": len(found.get("curve") or []),
    }


def _seconds(runs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['total_s']:.2f}" for r in runs)


def compare_api(workers: int, rounds: int, api_overflow: bool) -> list[dict[str, Any]]:
    """``rounds`` pairs of searches, API comparison off then on, alternated so that the
    machine's drift falls on both; prints the medians, their ratio and the API step's share."""
    runs = []
    for _ in range(rounds):
        runs.append(once(workers, api="never", api_overflow=api_overflow))
        runs.append(once(workers, api="allow", api_overflow=api_overflow))
    off = [r for r in runs if r["api"] == "never"]
    on = [r for r in runs if r["api"] == "allow"]
    off_s = statistics.median(r["total_s"] for r in off)
    on_s = statistics.median(r["total_s"] for r in on)
    step = [r["api_step"] for r in on]
    api_s = statistics.median(s["api_s"] for s in step)
    print(
        f"API comparison off / on ({rounds} alternated pair(s), overflow plan "
        f"{'on' if api_overflow else 'off'}): total {off_s:.2f} s / {on_s:.2f} s median "
        f"(off {_seconds(off)}; on {_seconds(on)}): {on_s / off_s:.3f}x the time"
    )
    print(
        f"API step inside the 'on' runs: {api_s * 1000:.0f} ms median = "
        f"{api_s / on_s:.2%} of the search; of it self_hosted_usd set-up "
        f"{statistics.median(s['setup_s'] for s in step) * 1000:.0f} ms, "
        f"{step[0]['cost_calls']} cost evaluations "
        f"{statistics.median(s['cost_s'] for s in step) * 1000:.0f} ms, break_even "
        f"{statistics.median(s['break_even_s'] for s in step) * 1000:.0f} ms (its evaluations "
        f"included); answer: {on[0]['api_choice']}"
    )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--serial", action="store_true", help="also run with one process")
    parser.add_argument("--dask", action="store_true", help="also run on a Dask LocalCluster")
    parser.add_argument(
        "--compare-disaggregation",
        action="store_true",
        help="also run with --disaggregation off (issue 33: the search with disaggregated "
        "pairs stays within 2x of the search without)",
    )
    parser.add_argument(
        "--compare-api",
        action="store_true",
        help="also time the search with the API comparison on (api=allow, the bundled API "
        "prices) against off (api=never), and the API step itself",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="--compare-api: off/on pairs, alternated"
    )
    parser.add_argument(
        "--api-overflow",
        action="store_true",
        help="--compare-api: with the API overflow plan (extra simulations); default off",
    )
    parser.add_argument("--json", type=Path, help="write results here")
    args = parser.parse_args()
    runs = [once(args.workers)] + ([once(1)] if args.serial else [])
    if args.compare_disaggregation:
        runs.append(once(args.workers, disaggregation="off"))
    if args.dask:
        runs.append(once(args.workers, "local"))
    if args.compare_api:
        runs += compare_api(args.workers, args.rounds, args.api_overflow)
    same = len({(r["winner"], r["winner_monthly_usd"]) for r in runs}) == 1
    for r in runs:
        verdict = "under" if r["screen_and_verify_s"] < TARGET_S else "OVER"
        print(
            f"{r['runner']}: {r['configurations']:,} configurations, "
            f"{r['screened']:,} screened in {r['screen_s']:.2f} s "
            f"({r['screened_per_s']:,}/s); {r['verified']} verified in {r['verify_s']:.1f} s: "
            f"{r['screen_and_verify_s']:.1f} s ({verdict} the {TARGET_S:.0f} s target); "
            f"tightening and growth check {r['refine_s']:.1f} s; {r['simulations']} simulations, "
            f"total {r['total_s']:.1f} s; winner {r['winner']} ${r['winner_monthly_usd']:,}/month; "
            f"disaggregation {r['disaggregation']}: {r['pairs_screened'] or 0} pairs screened, "
            f"{r['pairs_verified']} simulated, {r['architecture'] or 'not searched'} won"
        )
    if args.compare_disaggregation:
        ratio = runs[0]["total_s"] / runs[-1]["total_s"]
        print(f"with disaggregated pairs / without: {ratio:.2f}x the time (target: under 2x)")
    print("same winner in every run" if same else "RUNS DISAGREE")
    if args.json:
        payload = {"machine": platform.platform(), "python": platform.python_version()}
        args.json.write_text(json.dumps({**payload, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
