"""``planner simulate``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from planner.cli.context import print_json, stderr, stdout, store_from
from planner.cli.ingest import parse_start
from planner.errors import UsageError
from planner.latency.profile import DEFAULT_ENGINE
from planner.latency.registry import resolve_profile
from planner.simulate.fleet import ROUTERS, Autoscaler, FleetConfig
from planner.simulate.metrics import SLO
from planner.simulate.run import ServingSpec, SimulationResult, simulate
from planner.simulate.workload import Workload, from_dataset, read_rate_curve, synthetic, token_pool

DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?\s*$")


def parse_duration(option: str, text: str | None) -> float | None:
    """``2s``, ``200ms``, ``1.5``, ``1m`` -> seconds."""
    if text is None:
        return None
    match = DURATION.match(text)
    if not match:
        raise UsageError(f"{option} {text!r}: expected a duration such as 2s, 200ms or 1m")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    return value * {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[unit]


def class_slos(classes: tuple[str, ...], items: list[str], default: SLO) -> dict[str, SLO]:
    """Targets for every class: ``default``, overridden by ``--slo CLASS:ttft=1s,tpot=50ms``
    options."""
    slos: dict[str, SLO] = {name: default for name in classes}
    for item in items:
        name, sep, spec = item.partition(":")
        if not sep or not name:
            raise UsageError(f"--slo {item!r}: expected CLASS:ttft=2s,tpot=100ms,e2e=30s")
        targets: dict[str, float | None] = {
            "ttft_s": default.ttft_s,
            "tpot_s": default.tpot_s,
            "e2e_s": default.e2e_s,
        }
        for part in spec.split(","):
            key, eq, value = part.partition("=")
            if key.strip() not in ("ttft", "tpot", "e2e") or not eq:
                raise UsageError(f"--slo {item!r}: expected ttft=, tpot= or e2e= targets")
            targets[f"{key.strip()}_s"] = parse_duration(f"--slo {name}", value)
        slos[name] = SLO(**targets)
    unknown = [name for name in slos if name not in classes]
    if unknown:
        raise UsageError(
            f"--slo: unknown class {unknown[0]!r}; the workload's classes: {', '.join(classes)}"
        )
    return slos


def _rate_limits(items: list[str]) -> dict[str, tuple[float, float]]:
    limits = {}
    for item in items:
        name, sep, spec = item.partition("=")
        rate, colon, burst = spec.partition(":")
        try:
            limits[name] = (float(rate), float(burst) if colon else float(rate))
        except ValueError:
            raise UsageError(
                f"--rate-limit {item!r}: expected CLASS=RPS[:BURST], e.g. batch=5:20"
            ) from None
        if not sep or limits[name][0] <= 0 or limits[name][1] < 1:
            raise UsageError(
                f"--rate-limit {item!r}: expected CLASS=RPS[:BURST] with RPS > 0, BURST >= 1"
            )
    return limits


def _schedule(text: str | None) -> list[int] | None:
    if text is None:
        return None
    path = Path(text)
    raw = path.read_text(encoding="utf-8") if path.exists() else text
    try:
        counts = [int(x) for x in re.split(r"[,\s]+", raw.strip()) if x]
    except ValueError:
        raise UsageError(
            "--schedule: expected replica counts per hour (e.g. 2,2,4,6) or a file of them, "
            f"got {text!r}"
        ) from None
    if not counts or min(counts) < 0:
        raise UsageError("--schedule: expected non-negative replica counts, one per hour")
    return counts


def simulate_command(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="Replay an ingested dataset."),
    rates: Path | None = typer.Option(
        None, "--rates", help="Or: hourly request rates (CSV ds,y) for synthetic arrivals."
    ),
    tokens_from: str | None = typer.Option(
        None, "--tokens-from", help="With --rates: dataset whose (input, output) lengths to draw."
    ),
    cv: float = typer.Option(
        1.0,
        "--cv",
        help="With --rates: inter-arrival coefficient of variation (1 Poisson, >1 burstier).",
    ),
    load_scale: float = typer.Option(
        1.0, "--load-scale", help="Scale the replayed load (2.0 doubles it)."
    ),
    start: str | None = typer.Option(None, "--start", help="Replay from this time (ISO 8601)."),
    end: str | None = typer.Option(None, "--end", help="Replay until this time (ISO 8601)."),
    gpu: str = typer.Option(..., "--gpu", help="GPU type of each replica."),
    model: str = typer.Option(..., "--model", help="Model served."),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16, fp8, int8, int4-awq."),
    tp: int = typer.Option(1, "--tp", help="GPUs per replica (tensor parallelism)."),
    kv_cache: str = typer.Option("fp16", "--kv-cache", help="KV-cache precision: fp16 or fp8."),
    max_seqs: int = typer.Option(256, "--max-seqs", min=1, help="Most sequences per batch."),
    max_batched_tokens: int = typer.Option(
        8192, "--max-batched-tokens", min=1, help="Most tokens per iteration."
    ),
    no_chunked_prefill: bool = typer.Option(
        False, "--no-chunked-prefill", help="Prefill-first scheduling instead of chunked prefill."
    ),
    policy: str = typer.Option(
        "continuous", "--policy", help="continuous (vLLM-style) or static batching."
    ),
    static_batch: int = typer.Option(
        8, "--static-batch", min=1, help="Static batching: batch size."
    ),
    static_wait: str = typer.Option(
        "50ms", "--static-wait", help="Static batching: longest wait for a batch to fill."
    ),
    no_prefix_caching: bool = typer.Option(
        False, "--no-prefix-caching", help="Turn the prefix cache off."
    ),
    prefix_hit_rate: float = typer.Option(
        0.0,
        "--prefix-hit-rate",
        help="What-if share of prompt tokens cached (logs without block ids).",
    ),
    replicas: int = typer.Option(1, "--replicas", min=0, help="On-demand replicas (fixed fleet)."),
    spot: int = typer.Option(0, "--spot", min=0, help="Spot replicas (fixed fleet)."),
    reserved: int = typer.Option(0, "--reserved", min=0, help="Reserved replicas (fixed fleet)."),
    schedule: str | None = typer.Option(
        None, "--schedule", help="Replicas per hour, e.g. 2,2,4,6 (or a file of them)."
    ),
    autoscale: bool = typer.Option(
        False, "--autoscale", help="Reactive autoscaling (see --min/--max/--target-*)."
    ),
    min_replicas: int = typer.Option(1, "--min-replicas", help="Autoscaler floor."),
    max_replicas: int = typer.Option(16, "--max-replicas", help="Autoscaler ceiling."),
    target_utilization: float | None = typer.Option(
        None, "--target-utilization", help="Autoscaler: busy share to hold (default 0.7)."
    ),
    target_queue: float | None = typer.Option(
        None, "--target-queue", help="Autoscaler: outstanding requests per replica to hold."
    ),
    cold_start: str = typer.Option(
        "45s", "--cold-start", help="Autoscaler: time for a new replica to serve."
    ),
    warm_start: str = typer.Option(
        "7s", "--warm-start", help="Autoscaler: time from the warm pool."
    ),
    warm_pool: int = typer.Option(0, "--warm-pool", min=0, help="Autoscaler: replicas kept warm."),
    spot_rate: float = typer.Option(
        0.0, "--spot-interruptions-per-hour", help="Spot interruption rate per replica-hour."
    ),
    spot_replace: str = typer.Option(
        "120s", "--spot-replace", help="Time to replace an interrupted spot replica."
    ),
    router: str = typer.Option("least-requests", "--router", help=f"Router: {', '.join(ROUTERS)}."),
    rate_limit: list[str] = typer.Option(
        [], "--rate-limit", help="Admission control per class: CLASS=RPS[:BURST]."
    ),
    response_cache_hit_rate: float = typer.Option(
        0.0,
        "--response-cache-hit-rate",
        help="Share of requests answered from an exact-match cache.",
    ),
    slo_ttft: str | None = typer.Option(
        None, "--slo-ttft", help="P99 target for time to first token, e.g. 2s."
    ),
    slo_tpot: str | None = typer.Option(
        None, "--slo-tpot", help="Target for time per output token, e.g. 100ms."
    ),
    slo_e2e: str | None = typer.Option(
        None, "--slo-e2e", help="Target for end-to-end latency, e.g. 30s."
    ),
    slo: list[str] = typer.Option([], "--slo", help="Per-class targets: CLASS:ttft=1s,tpot=50ms."),
    price_per_hour: float | None = typer.Option(
        None, "--price-per-hour", help="$ per on-demand replica-hour."
    ),
    spot_price_per_hour: float | None = typer.Option(
        None, "--spot-price-per-hour", help="$ per spot replica-hour."
    ),
    reserved_price_per_hour: float | None = typer.Option(
        None, "--reserved-price-per-hour", help="$ per reserved replica-hour."
    ),
    engine: str = typer.Option(DEFAULT_ENGINE, "--engine", help="Engine whose calibration to use."),
    profile_name: str | None = typer.Option(None, "--profile", help="Calibration profile."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same result)."),
    out_requests: Path | None = typer.Option(
        None, "--out-requests", help="Per-request results: .parquet, .csv or .jsonl."
    ),
    out_summary: Path | None = typer.Option(None, "--out-summary", help="Summary as JSON."),
    out_timeline: Path | None = typer.Option(
        None, "--out-timeline", help="Replicas, utilization and queue over time, CSV."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Simulate a fleet serving a request stream: latency percentiles, SLO attainment, cost."""
    if (dataset is None) == (rates is None):
        raise UsageError("give exactly one of --dataset (replay) or --rates (synthetic arrivals)")
    if policy not in ("continuous", "static"):
        raise UsageError(f"--policy {policy!r}: expected continuous or static")
    default_slo = SLO(
        parse_duration("--slo-ttft", slo_ttft),
        parse_duration("--slo-tpot", slo_tpot),
        parse_duration("--slo-e2e", slo_e2e),
    )
    serving = ServingSpec(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=tp,
        kv_cache=kv_cache,
        max_seqs=max_seqs,
        max_batched_tokens=max_batched_tokens,
        chunked_prefill=not no_chunked_prefill,
        policy=policy,
        static_max_batch=static_batch,
        static_max_wait_s=parse_duration("--static-wait", static_wait) or 0.0,
        prefix_caching=not no_prefix_caching,
        prefix_hit_rate=prefix_hit_rate,
    )
    scaler = None
    if autoscale:
        scaler = Autoscaler(
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            target_utilization=None if target_queue is not None else (target_utilization or 0.7),
            target_queue=target_queue,
            cold_start_s=parse_duration("--cold-start", cold_start) or 0.0,
            warm_start_s=parse_duration("--warm-start", warm_start) or 0.0,
            warm_pool=warm_pool,
        )
    purchase = {
        k: v for k, v in {"on-demand": replicas, "spot": spot, "reserved": reserved}.items() if v
    }
    fleet = FleetConfig(
        replicas=purchase,
        schedule=_schedule(schedule),
        autoscaler=scaler,
        router=router,
        gpus_per_replica=tp,
        spot_interruptions_per_hour=spot_rate,
        spot_replace_s=parse_duration("--spot-replace", spot_replace) or 0.0,
        rate_limits=_rate_limits(rate_limit),
        response_cache_hit_rate=response_cache_hit_rate,
        seed=seed,
    )
    prices = {
        k: v
        for k, v in {
            "on-demand": price_per_hour,
            "spot": spot_price_per_hour,
            "reserved": reserved_price_per_hour,
        }.items()
        if v is not None
    }
    with store_from(ctx) as store, store.session() as session:
        workload: Workload
        if dataset is not None:
            workload = from_dataset(
                session,
                dataset,
                load_scale=load_scale,
                start=parse_start(start, "--start"),
                end=parse_start(end, "--end"),
                seed=seed,
            )
        else:
            assert rates is not None
            if tokens_from is None:
                raise UsageError("--rates needs --tokens-from DATASET for request lengths")
            inputs, outputs = token_pool(session, tokens_from)
            workload = synthetic(read_rate_curve(rates), inputs, outputs, seed=seed, cv=cv)
        profile = resolve_profile(session, serving.deployment().gpu.name, engine, profile_name)
    slos = class_slos(workload.classes, slo, default_slo)
    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        TimeElapsedColumn(),
        console=stderr,
        disable=quiet or not stderr.is_terminal,
        transient=True,
    ) as bar:
        task = bar.add_task("simulate", total=len(workload))
        result = simulate(
            workload,
            serving,
            fleet,
            profile,
            slos=slos,
            price_per_replica_hour=prices or None,
            requests_out=out_requests,
            progress=lambda done: bar.update(task, completed=done),
        )
    data = result.to_dict()
    if out_summary is not None:
        out_summary.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    if out_timeline is not None:
        result.timeline.to_csv(out_timeline, index=False)
    if as_json:
        print_json(data)
        return
    _print(result)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def _print(result: SimulationResult) -> None:
    s = result.serving
    stdout.print(
        f"[bold]{s['model']}[/] {s['precision']} on {s['tp']} x {s['gpu']} per replica, "
        f"{s['policy']} batching, router {s['router']}, profile {escape(s['profile'])}"
    )
    overall = result.summary["all"]
    stdout.print(
        f"{result.requests:,} requests over {result.simulated_s / 3600:,.2f} h simulated in "
        f"{result.wall_s:,.1f} s ({result.requests / result.wall_s:,.0f} requests/s)"
    )
    table = Table("latency (ms)", "P50", "P90", "P95", "P99", "max", "mean")
    for key, label in (
        ("ttft", "time to first token"),
        ("tpot", "time per output token"),
        ("e2e", "end-to-end"),
    ):
        stats = overall[key]
        table.add_row(
            label, *(_ms(stats.get(q)) for q in ("p50", "p90", "p95", "p99", "max", "mean"))
        )
    stdout.print(table)
    stdout.print(
        f"finished {overall['finished']:,}, rejected {overall['rejected']:,}; "
        f"SLO attainment {overall['slo_attainment']:.1%}; "
        f"goodput {overall['goodput_rps'] or 0:,.2f} req/s; "
        f"throughput {overall['throughput_rps'] or 0:,.2f} req/s, "
        f"{overall['output_tokens_per_s'] or 0:,.0f} output tokens/s"
    )
    fleet = result.fleet
    hours = ", ".join(f"{k} {v:,.1f}" for k, v in fleet.gpu_hours.items())
    stdout.print(
        f"fleet: {fleet.launched} replicas launched, peak {fleet.peak_replicas}; "
        f"GPU-hours {hours}; "
        f"spot interruptions {fleet.spot_interruptions}; preemptions {overall['preemptions']:,}"
    )
    if result.cost is not None:
        stdout.print(f"cost: ${result.cost['total']:,.2f}")
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False)
