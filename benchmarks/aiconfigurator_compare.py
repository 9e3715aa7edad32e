"""planner beside NVIDIA AIConfigurator on its own cases (issue 33, deliverable 5).

Reads AIConfigurator 0.12.0's choices from ``data/reference/aiconfigurator_disagg.csv``
(``benchmarks/aiconfigurator_disagg.py`` made it, in AIConfigurator's own environment) and,
in one run:

1. **Its configurations, our simulation.** Each of its chosen aggregated and disaggregated
   configurations (and the fixed-configuration estimates) is simulated by planner at the
   request rate AIConfigurator predicts for it: Poisson arrivals, ISL/OSL fixed, the
   ``trtllm-default``-family profile of the GPU, TensorRT-LLM's sizing, its batch as the
   replicas' max sequences, prefill and decode joined by the node's NVLink, the first token
   from the prefill side (TensorRT-LLM's context servers). Side by side: TTFT, TPOT,
   tokens/s/GPU (output tokens over the run / GPUs) and tokens/s/user (1000 / TPOT).
2. **Our own choice.** ``recommend`` on one 8-GPU instance type of that GPU (a nominal
   $8/hour: the cost ranks GPU-hours), a one-hour demand at the rate AIConfigurator's pick
   serves, its default targets as P99 targets (TTFT 2 s, TPOT 30 ms; AIConfigurator's are
   means), no confidence margin: which architecture and layout we pick, its simulated P99s and
   tokens/s/GPU, and our search time beside its.

Mapping (stated in the output): data-parallel attention (AIConfigurator's ``dp``) becomes
tensor parallelism over the same GPUs (planner does not model DP attention), with expert
parallelism over them where it used EP; ``w4a16_mxfp4`` MoE weights become planner's
``mxfp4``.

    python benchmarks/aiconfigurator_compare.py [--cases 70b,8b] [--requests 1500] [--no-search]
        [--json OUT] [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from planner.latency.profile import choose_profile, load_bundled_profiles
from planner.simulate.disagg import DisaggregatedSpec, simulate_disaggregated
from planner.simulate.fleet import FleetConfig
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

ROOT = Path(__file__).resolve().parent.parent
CSV = ROOT / "data" / "reference" / "aiconfigurator_disagg.csv"
START = datetime(2026, 1, 1, tzinfo=UTC)
MODELS = {
    "meta-llama/Meta-Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Meta-Llama-3.1-8B": "llama-3.1-8b",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
}
GPUS = {"h200_sxm": "H200", "h100_sxm": "H100-SXM"}
LINKS = {"h200_sxm": "nvlink-h200", "h100_sxm": "nvlink-h100"}
ENGINE = "trtllm"


def rows() -> list[dict[str, str]]:
    with CSV.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _int(text: str, default: int = 1) -> int:
    return int(float(text)) if text.strip() else default


def precision(row: dict[str, str]) -> str:
    return "mxfp4" if "mxfp4" in row["moe_quant"] else "bf16"


def workload(rate: float, isl: int, osl: int, count: int, seed: int = 0) -> Workload:
    arrivals = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, count))
    return Workload(
        start=START,
        arrival_s=arrivals,
        input_tokens=np.full(count, isl, dtype=np.int64),
        output_tokens=np.full(count, osl, dtype=np.int64),
        class_index=np.zeros(count, dtype=np.int16),
        classes=("default",),
    )


def _spec(row: dict[str, str], gpus: int, batch: int, experts: bool) -> ServingSpec:
    model = MODELS[row["model"]]
    return ServingSpec(
        gpu=GPUS[row["system"]],
        model=model,
        precision=precision(row),
        tp=gpus,
        max_seqs=max(1, batch),
        engine=ENGINE,
        ep=gpus if experts and gpus > 1 else 1,
    )


def _profile(row: dict[str, str]) -> Any:
    return choose_profile(load_bundled_profiles(), GPUS[row["system"]], ENGINE)


def ours_for(row: dict[str, str], requests: int) -> dict[str, Any]:
    """planner's simulation of the row's configuration at the row's request rate."""
    rate = float(row["request_rate"])
    isl, osl = int(row["isl"]), int(row["osl"])
    count = max(300, min(requests, int(rate * 600)))
    work = workload(rate, isl, osl, count)
    profile = _profile(row)
    replicas = _int(row["replicas"])
    if row["mode"] == "agg":
        gpus = _int(row["gpus_per_replica"])
        experts = _int(row["moe_ep"]) > 1
        spec = _spec(row, gpus, _int(row["batch"]), experts)
        result = simulate(work, spec, FleetConfig(replicas={"on-demand": replicas}), profile)
        layout = f"{replicas} x TP{gpus}" + (" EP" if experts else "") + f" bs{row['batch']}"
        used = replicas * gpus
    else:
        p_gpus = _int(row["prefill_tp"]) * _int(row["prefill_dp"])
        d_gpus = _int(row["decode_tp"]) * _int(row["decode_dp"])
        p_count = replicas * _int(row["prefill_workers_per_replica"])
        d_count = replicas * _int(row["decode_workers_per_replica"])
        prefill = _spec(row, p_gpus, 1, _int(row["prefill_moe_ep"]) > 1)
        decode = _spec(row, d_gpus, _int(row["decode_batch"]), _int(row["decode_moe_ep"]) > 1)
        prefill = ServingSpec(**{**prefill.__dict__, "max_seqs": None})
        spec_d = DisaggregatedSpec(prefill, decode, LINKS[row["system"]], "prefill")
        result = simulate_disaggregated(
            work,
            spec_d,
            FleetConfig(replicas={"on-demand": p_count}),
            FleetConfig(replicas={"on-demand": d_count}),
            profile,
        )
        layout = f"{p_count}P TP{p_gpus} + {d_count}D TP{d_gpus} bs{row['decode_batch']}"
        used = p_count * p_gpus + d_count * d_gpus
    s = result.summary["all"]
    span = result.simulated_s - float(work.arrival_s[0])
    tpot = s["tpot"]["mean"]
    return {
        "case": row["case_id"],
        "kind": row["kind"],
        "mode": row["mode"],
        "chosen": row["chosen"] == "True",
        "layout": layout,
        "gpus": used,
        "rate": rate,
        "requests": count,
        "aic_ttft_ms": float(row["ttft_ms"]),
        "aic_tpot_ms": float(row["tpot_ms"]),
        "aic_tokens_s_gpu": float(row["tokens_s_gpu"]),
        "aic_tokens_s_user": float(row["tokens_s_user"]),
        "ttft_p50_ms": s["ttft"]["p50"] * 1e3,
        "ttft_mean_ms": s["ttft"]["mean"] * 1e3,
        "ttft_p99_ms": s["ttft"]["p99"] * 1e3,
        "tpot_mean_ms": tpot * 1e3,
        "tpot_p99_ms": s["tpot"]["p99"] * 1e3,
        "tokens_s_gpu": s["output_tokens"] / span / used,
        "tokens_s_user": 1.0 / tpot,
        "finished": s["finished"],
        "transfer_p50_ms": (
            result.disaggregation["transfer_s"]["p50"] * 1e3 if result.disaggregation else None
        ),
    }


def our_choice(row: dict[str, str]) -> dict[str, Any]:
    """planner's own pick for the demand AIConfigurator's pick serves (one hour at its rate)."""
    from planner.recommend.engine import recommend
    from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
    from planner.simulate.metrics import SLO
    from planner.workload.rates import RateCurve
    from pricing.model import PricePoint, Provider, PurchaseOption

    rate = float(row["request_rate"])
    isl, osl = int(row["isl"]), int(row["osl"])
    gpu = GPUS[row["system"]]
    price = PricePoint(
        provider=Provider.AWS,
        region="us-east-1",
        instance_type=f"{gpu.lower()}-x8",
        gpu_model=gpu,
        gpu_count=8,
        purchase_option=PurchaseOption.ON_DEMAND,
        usd_per_hour=8.0,
        source="nominal: $1 per GPU-hour, to rank GPU-hours",
        effective_date="2026-12-07",
    )
    demand = Demand(
        RateCurve(START, np.array([rate * 3600.0])),
        np.full(200, isl, dtype=np.int64),
        np.full(200, osl, dtype=np.int64),
        f"AIConfigurator {row['case_id']}",
    )
    request = Request(
        demand,
        Targets({"default": SLO(ttft_s=2.0, tpot_s=0.030)}),
        Constraints(
            model=MODELS[row["model"]],
            precisions=(precision(row),),
            engine=ENGINE,
            min_replicas=1,
        ),
        SearchOptions(
            engine=ENGINE,
            confidence=None,
            growth_check=False,
            workers=1,
            verify_top=6,
        ),
    )
    began = time.perf_counter()
    result = recommend(request, [price]).to_dict()
    wall = time.perf_counter() - began
    winner = result["winner"]
    arch = result.get("architecture") or {}
    if winner is None:
        return {"case": row["case_id"], "search_s": wall, "pick": "none", "aic_s": row}
    disagg = winner.get("architecture") == "disaggregated"
    peak_gpus = (
        winner["prefill_replicas_peak"] * winner["prefill_tp"]
        + winner["decode_replicas_peak"] * winner["decode_tp"]
        if disagg
        else winner["peak_replicas"] * winner["tp"]
    )
    layout = (
        f"{winner['prefill_replicas_peak']}P TP{winner['prefill_tp']} + "
        f"{winner['decode_replicas_peak']}D TP{winner['decode_tp']} bs{winner['max_seqs']}"
        if disagg
        else f"{winner['peak_replicas']} x TP{winner['tp']} bs{winner['max_seqs']}"
    )
    return {
        "case": row["case_id"],
        "pick": "disagg" if disagg else "agg",
        "layout": layout,
        "gpus": peak_gpus,
        "instances": winner["peak_instances"],
        "tokens_s_gpu": rate * osl / peak_gpus,
        "ttft_p99_ms": (winner["p99_ttft_s"] or 0) * 1e3,
        "tpot_p99_ms": (winner["p99_tpot_s"] or 0) * 1e3,
        "aggregated_usd": arch.get("aggregated_monthly_usd"),
        "disaggregated_usd": arch.get("disaggregated_monthly_usd"),
        "search_s": wall,
        "aic_search_s": float(row["search_wall_s"] or "nan"),
        "aic_pick": row["mode"],
    }


def _pct(ours: float, theirs: float) -> str:
    return f"{(ours / theirs - 1) * 100:+.0f}%" if theirs else "-"


def markdown(sims: list[dict[str, Any]], picks: list[dict[str, Any]]) -> str:
    lines = [
        "| case | mode | layout | rate | TTFT AIC / ours mean (P99) ms "
        "| TPOT AIC / ours mean (P99) ms | tok/s/GPU AIC / ours |",
        "|---|---|---|--:|---|---|---|",
    ]
    for r in sims:
        tag = (
            r["mode"]
            + (" *" if r["chosen"] else "")
            + (" (est.)" if r["kind"] == "estimate" else "")
        )
        lines.append(
            f"| {r['case']} | {tag} | {r['layout']} | {r['rate']:.2f} | "
            f"{r['aic_ttft_ms']:,.0f} / {r['ttft_mean_ms']:,.0f} ({r['ttft_p99_ms']:,.0f}) | "
            f"{r['aic_tpot_ms']:.1f} / {r['tpot_mean_ms']:.1f} ({r['tpot_p99_ms']:.1f}) | "
            f"{r['aic_tokens_s_gpu']:,.0f} / {r['tokens_s_gpu']:,.0f} |"
        )
    if picks:
        lines += [
            "",
            "| case | AIC picks | we pick | our layout | GPUs at peak | our P99 TTFT / TPOT ms"
            " | our search s | AIC search s |",
            "|---|---|---|---|--:|---|--:|--:|",
        ]
        for p in picks:
            if p["pick"] == "none":
                lines.append(
                    f"| {p['case']} | | none met the targets | | | | {p['search_s']:.1f} | |"
                )
                continue
            lines.append(
                f"| {p['case']} | {p['aic_pick']} | {p['pick']} | {p['layout']} | {p['gpus']} | "
                f"{p['ttft_p99_ms']:,.0f} / {p['tpot_p99_ms']:.1f} | {p['search_s']:.1f} | "
                f"{p['aic_search_s']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma list of substrings of case ids (default: all)")
    parser.add_argument(
        "--requests", type=int, default=30_000, help="most requests per simulation (10 min)"
    )
    parser.add_argument("--no-search", action="store_true", help="skip our own choice")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    wanted = [c.strip() for c in (args.cases or "").split(",") if c.strip()]
    chosen = [r for r in rows() if not wanted or any(w in r["case_id"] for w in wanted)]
    sims = [ours_for(r, args.requests) for r in chosen]
    picks = []
    if not args.no_search:
        picks = [our_choice(r) for r in chosen if r["kind"] == "search" and r["chosen"] == "True"]
    text = markdown(sims, picks)
    print(text)
    errors = [
        abs(s["tpot_mean_ms"] / s["aic_tpot_ms"] - 1)
        for s in sims
        if math.isfinite(s["tpot_mean_ms"])
    ]
    if errors:
        print(
            f"\nTPOT, ours vs AIConfigurator's (mean): median |difference| {np.median(errors):.0%}"
        )
    if args.json:
        args.json.write_text(json.dumps({"simulations": sims, "choices": picks}, indent=2) + "\n")


if __name__ == "__main__":
    main()
