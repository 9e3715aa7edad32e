"""Mélange's setting reproduced: a mix of GPU types against the best single GPU type.

Mélange (Griggs et al. 2024, "Mélange: Cost Efficient Large Language Model Serving by
Exploiting GPU Heterogeneity", arXiv:2404.14527; code github.com/tyler-griggs/melange-release)
serves Llama-2-7B on L4, A10G, A100-80GB and H100 at a TPOT target of 40 ms or 120 ms, for
three request-length distributions (short: Chatbot Arena conversations; long: PubMed
documents; mixed: 80% Arena, 20% PubMed) at 1, 2, 4, 8, 16 and 32 requests/s, and reports the
cost of each single-GPU-type fleet relative to its mix. This benchmark runs the same grid
through :func:`planner.recommend.mix.recommend_fleet` (size buckets at Mélange's input-size
boundaries) and through the one-pool search restricted to each GPU type, on Mélange's own
$/hour, and prints both beside the savings read off Mélange's published figures.

Everything it uses is in this file: the prices, the length distributions (synthetic, drawn
from published statistics; nothing is downloaded) and Mélange's figures. See
docs/recommender.md, "Checked against published work: Mélange".

    python benchmarks/melange.py [--quick] [--json OUT] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.recommend import engine
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.mix import FleetRequest, ModelDemand, recommend_fleet
from planner.recommend.verify import Runner
from planner.simulate.metrics import SLO
from planner.workload.rates import RateCurve
from pricing.costs import HOURS_PER_MONTH
from pricing.model import PricePoint, Provider, PurchaseOption

MODEL = "llama-2-7b"
CONTEXT = 4096  # Llama-2's context window: a request's input + output fit in it
ENGINE = "vllm"  # Mélange served with vLLM: its memory rule, preemption and calibration

# --- Mélange's prices -------------------------------------------------------------------------
# $/hour per GPU, as Mélange used them. A10G $1.01 and A100-80GB $3.67 are in the repository's
# melange/config/example.json; L4 $0.70 and H100 $7.5164 are the paper's Table 1 values, and
# they agree with its figures: at 1 req/s, 120 ms (docs/images/Arena_120-1.png) the H100-only
# fleet costs 4.4x Mélange's and the A100-only one 2.15x, i.e. one H100 ($7.52) and one A100
# ($3.67) against a $1.71 mix (one L4 + one A10G), with 2 A10G at 1.18x and 3 L4 at 1.23x.
MELANGE_USD_PER_HOUR = {"L4": 0.70, "A10G": 1.01, "A100-80GB": 3.67, "H100-SXM": 7.5164}
GPUS = tuple(MELANGE_USD_PER_HOUR)
PRICE_SOURCE = "Mélange (arXiv:2404.14527) Table 1 / melange-release config/example.json"

RATES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # req/s, the x axis of Mélange's figures 11-13
QUICK_RATES = (2.0, 8.0, 32.0)
TPOT_TARGETS_S = (0.120, 0.040)
# Mélange buckets requests by input (and output) size; these are its input boundaries
# (README: "1-25, 25-100, 100-250, ..."), continued by doubling to the 4k context. Our buckets
# are by input size only; one with under 5% of the requests joins a neighbour.
SIZE_BUCKETS = (25, 100, 250, 500, 1000, 2000)

# --- Mélange's results ------------------------------------------------------------------------
# Cost of each single-GPU-type fleet relative to Mélange's mix, read off the bar charts in
# melange-release docs/images/{Arena,Pubmed,Mixed_80_20}_{120,40}-1.png (+-0.03), rates
# 1, 2, 4, 8, 16, 32 req/s. PubMed and Mixed show H100 and A100 only. The saving against the
# best single GPU type is 1 - 1 / min(ratios).
PUBLISHED: dict[tuple[str, float], dict[str, tuple[float, ...]]] = {
    ("short", 0.120): {
        "H100-SXM": (4.40, 3.10, 1.70, 2.03, 2.07, 2.33),
        "A100-80GB": (2.15, 1.52, 1.67, 1.48, 1.52, 1.27),
        "A10G": (1.17, 1.25, 1.38, 1.50, 1.38, 1.52),
        "L4": (1.22, 1.45, 1.43, 1.60, 1.59, 1.76),
    },
    ("short", 0.040): {
        "H100-SXM": (3.10, 2.03, 1.38, 1.65, 1.75, 1.74),
        "A100-80GB": (1.52, 1.00, 1.35, 1.20, 1.28, 1.09),
        "A10G": (1.25, 1.37, 1.87, 1.78, 2.34, 2.68),
        "L4": (1.45, 1.70, 2.20, 2.62, 2.78, 3.13),
    },
    ("long", 0.120): {
        "H100-SXM": (1.34, 1.38, 1.49, 1.34, 1.34, 1.31),
        "A100-80GB": (1.31, 1.18, 1.27, 1.26, 1.24, 1.23),
    },
    ("long", 0.040): {
        "H100-SXM": (1.02, 1.14, 1.08, 1.04, 1.06, 1.08),
        "A100-80GB": (1.00, 1.25, 1.28, 1.23, 1.24, 1.25),
    },
    ("mixed", 0.120): {
        "H100-SXM": (2.03, 1.71, 1.57, 1.61, 1.56, 1.55),
        "A100-80GB": (1.00, 1.67, 1.15, 1.31, 1.27, 1.26),
    },
    ("mixed", 0.040): {
        "H100-SXM": (2.03, 1.39, 1.42, 1.61, 1.37, 1.30),
        "A100-80GB": (1.00, 1.36, 1.04, 1.18, 1.14, 1.17),
    },
}


def published_saving(dataset: str, tpot_s: float, rate: float) -> float:
    """Mélange's saving against the best single GPU type at ``rate`` (from its figures)."""
    i = RATES.index(rate)
    best = min(r[i] for r in PUBLISHED[(dataset, tpot_s)].values())
    return 1.0 - 1.0 / best


# --- the request lengths ----------------------------------------------------------------------
# Synthetic, from published statistics (Mélange's own token counts are not published):
# - short (Chatbot Arena): LMSYS-Chat-1M (Zheng et al. 2023, arXiv:2309.11998, Table 1), the
#   dataset Mélange links: 69.5 tokens per prompt and 214.5 per response on average. Lognormal
#   with those means (sigma 1.0 for prompts, 0.8 for responses: chat lengths are heavy-tailed).
# - long (PubMed): the PubMed summarization set (Cohan et al. 2018, arXiv:1804.05685, Table 1):
#   3,016 words per article, 203 per abstract, at 1.3 Llama tokens per word (3,920 and 264
#   tokens); lognormal (sigma 0.5 and 0.4), the article cut to fit Llama-2's 4,096-token
#   context with its abstract, as any Llama-2 server must.
# - mixed: 80% short and 20% long (Mélange's "Mixed_80_20").
SAMPLES = 20_000


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, n: int) -> NDArray[np.float64]:
    return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, n)


def lengths(dataset: str, seed: int = 0) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(input, output) token pairs for ``dataset`` (short, long or mixed)."""
    rng = np.random.default_rng(seed)
    if dataset == "mixed":
        short_in, short_out = lengths("short", seed + 1)
        long_in, long_out = lengths("long", seed + 2)
        n_long = SAMPLES // 5
        return (
            np.concatenate([short_in[: SAMPLES - n_long], long_in[:n_long]]),
            np.concatenate([short_out[: SAMPLES - n_long], long_out[:n_long]]),
        )
    if dataset == "short":
        inputs = _lognormal(rng, 69.5, 1.0, SAMPLES)
        outputs = _lognormal(rng, 214.5, 0.8, SAMPLES)
    elif dataset == "long":
        inputs = _lognormal(rng, 3016 * 1.3, 0.5, SAMPLES)
        outputs = _lognormal(rng, 203 * 1.3, 0.4, SAMPLES)
    else:
        raise ValueError(f"unknown dataset {dataset!r}: short, long or mixed")
    out = np.clip(np.rint(outputs), 2, 1024).astype(np.int64)
    inp = np.clip(np.rint(inputs), 1, CONTEXT - out).astype(np.int64)
    return inp, out


# --- the runs ---------------------------------------------------------------------------------

START = datetime(2024, 4, 22, tzinfo=UTC)  # Mélange's first preprint; any hour would do


def prices() -> list[PricePoint]:
    """One single-GPU instance per GPU type at Mélange's $/hour, on demand only."""
    return [
        PricePoint(
            provider=Provider.OTHER,
            region="melange",
            instance_type=f"1x{gpu}",
            gpu_model=gpu,
            gpu_count=1,
            purchase_option=PurchaseOption.ON_DEMAND,
            usd_per_hour=usd,
            source=PRICE_SOURCE,
            effective_date="2024-04-22",
        )
        for gpu, usd in MELANGE_USD_PER_HOUR.items()
    ]


def request(
    dataset: str, rate: float, tpot_s: float, gpus: tuple[str, ...], workers: int
) -> Request:
    """One hour at a constant ``rate`` (Mélange plans for one rate), TPOT only (Mélange has no
    TTFT target), vLLM with its settings of 2024: bf16, one GPU per replica, 256 sequences,
    no chunked prefill; point estimates (no confidence margin: Mélange has none)."""
    inputs, outputs = lengths(dataset)
    demand = Demand(RateCurve(START, np.array([rate * 3600.0])), inputs, outputs, dataset)
    return Request(
        demand,
        Targets({"default": SLO(tpot_s=tpot_s)}),
        Constraints(
            model=MODEL,
            gpus=gpus,
            precisions=("bf16",),
            tp_degrees=(1,),
            max_seqs=(256,),
            chunked_prefill=(False,),
            engine=ENGINE,
        ),
        SearchOptions(
            verify_top=3,
            growth_check=False,
            tighten_steps=2,
            workers=workers,
            compare_gpus=False,
            engine=ENGINE,
        ),
    )


@dataclass
class Case:
    dataset: str
    tpot_s: float
    rate: float


def _fleet_text(rows: list[dict[str, Any]]) -> str:
    return " + ".join(f"{p['instances_peak']} {p['gpu']}" for p in rows)


def _rejected_mix(how: str) -> float | None:
    """The verified cost of a mix the search found dearer than one pool, from its reason
    ("the mixed pools cost $1,248/month once verified, not less than one pool ($737)...")."""
    prefix = "the mixed pools cost $"
    if not how.startswith(prefix):
        return None
    return float(how[len(prefix) :].split("/month")[0].replace(",", "")) / HOURS_PER_MONTH


def run_case(case: Case, workers: int, runner: Runner) -> dict[str, Any]:
    """The mix, and the cheapest one-pool fleet of each GPU type, for one point of the grid."""
    began = time.perf_counter()
    base = request(case.dataset, case.rate, case.tpot_s, GPUS, workers)
    fleet = recommend_fleet(
        FleetRequest((ModelDemand(MODEL, base.demand, base.targets),), base, SIZE_BUCKETS),
        prices(),
        runner=runner,
    ).to_dict()
    winner = fleet["winner"]
    per_gpu: dict[str, float | None] = {}
    for gpu in GPUS:
        try:
            single = engine.recommend(
                request(case.dataset, case.rate, case.tpot_s, (gpu,), workers),
                prices(),
                runner=runner,
            )
        except UsageError as error:  # no configuration of this GPU type meets the target
            per_gpu[gpu] = None
            print(f"  {gpu}: {error}")
            continue
        per_gpu[gpu] = single.winner["monthly_usd"] / HOURS_PER_MONTH if single.winner else None
    mix_usd = winner["monthly_usd"] / HOURS_PER_MONTH if winner else None
    served = {g: v for g, v in per_gpu.items() if v is not None}
    best_gpu = min(served, key=served.__getitem__) if served else None
    pools = winner["pools"] if winner else []
    return {
        "dataset": case.dataset,
        "tpot_ms": round(case.tpot_s * 1000),
        "rate": case.rate,
        "mix_usd_per_hour": mix_usd,
        "mix": [
            {
                "gpu": p["gpu"],
                "instances": p["instances_peak"],
                "input_tokens": p["input_tokens_ranges"],
                "share": p["share_of_requests"],
            }
            for p in pools
        ],
        "how": fleet["models"][0]["how"],
        "rejected_mix_usd_per_hour": _rejected_mix(fleet["models"][0]["how"]),
        "single_pool_usd_per_hour": (
            winner["single_pool_monthly_usd"] / HOURS_PER_MONTH if winner else None
        ),
        "per_gpu_usd_per_hour": per_gpu,
        "best_gpu": best_gpu,
        "saving_vs_best_gpu": (1 - mix_usd / served[best_gpu]) if mix_usd and best_gpu else None,
        "published_saving_vs_best_gpu": published_saving(case.dataset, case.tpot_s, case.rate),
        "milp_s": fleet["stats"]["milp_s"],
        "seconds": time.perf_counter() - began,
    }


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def markdown(results: list[dict[str, Any]]) -> str:
    """The comparison as the table in docs/recommender.md."""
    lines = [
        "| lengths, TPOT | req/s | Mélange: saving vs best type | our fleet search | "
        "$/h | best one type (ours) | our saving vs it | per type: L4, A10G, A100, H100 |",
        "|---|---:|---:|---|---:|---|---:|---|",
    ]
    for r in results:
        mix = " + ".join(
            f"{p['instances']} {p['gpu']} ({', '.join(map(_range, p['input_tokens']))})"
            if len(r["mix"]) > 1
            else f"{p['instances']} {p['gpu']}"
            for p in r["mix"]
        )
        if r["rejected_mix_usd_per_hour"] is not None:
            mix += f" (a mix: {_usd(r['rejected_mix_usd_per_hour'])} verified)"
        best = r["best_gpu"]
        per_gpu = ", ".join(_usd(r["per_gpu_usd_per_hour"][g]) for g in GPUS)
        lines.append(
            f"| {r['dataset']}, {r['tpot_ms']} ms | {r['rate']:g} | "
            f"{_pct(r['published_saving_vs_best_gpu'])} | {mix or '-'} | "
            f"{_usd(r['mix_usd_per_hour'])} | "
            f"{best} {_usd(r['per_gpu_usd_per_hour'][best]) if best else ''} | "
            f"{_pct(r['saving_vs_best_gpu'])} | {per_gpu} |"
        )
    return "\n".join(lines)


def _range(r: list[int | None]) -> str:
    low, high = r
    return f"{low:,}+" if high is None else f"{low:,}-{high - 1:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"rates {QUICK_RATES} only")
    parser.add_argument("--datasets", default="short,long,mixed")
    parser.add_argument("--tpot-ms", default="120,40")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--from-json", type=Path, help="print the table of an earlier run")
    args = parser.parse_args()
    if args.from_json:
        print(markdown(json.loads(args.from_json.read_text())["results"]))
        return
    rates = QUICK_RATES if args.quick else RATES
    cases = [
        Case(d, int(t) / 1000, r)
        for d in args.datasets.split(",")
        for t in args.tpot_ms.split(",")
        for r in rates
    ]
    began = time.perf_counter()
    results = []
    runner = Runner(args.workers, None)
    try:
        for case in cases:
            r = run_case(case, args.workers, runner)
            results.append(r)
            print(json.dumps(r))
    finally:
        runner.close()
    print(markdown(results))
    print(f"{len(results)} cases in {time.perf_counter() - began:.0f} s")
    if args.json:
        payload = {"machine": platform.platform(), "python": platform.python_version()}
        args.json.write_text(json.dumps({**payload, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
