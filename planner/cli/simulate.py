"""``planner simulate``."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from planner.cli.context import print_json, stderr, stdout, store_from
from planner.cli.ingest import parse_start
from planner.cli.latency import check_kv_cache, check_memory_utilization, engine_profile
from planner.cli.options import ENGINE_OPTION, GPU_MEMORY_UTILIZATION_OPTION, KV_CACHE_OPTION
from planner.common.files import atomic_output, check_output_path, write_text_atomic
from planner.common.text import printable, shown
from planner.errors import UsageError
from planner.latency.engines import get_engine
from planner.simulate.fleet import ROUTERS, Autoscaler, FleetConfig
from planner.simulate.metrics import SLO, RequestWriter
from planner.simulate.run import ServingSpec, SimulationResult, simulate
from planner.simulate.workload import Workload, from_dataset, read_rate_curve, synthetic, token_pool

DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?\s*$")
MAX_DURATION_S = 7 * 24 * 3600.0  # a latency target or a start-up time of more than a week
# Requests a run may simulate unless --max-requests says more: about 20,000 requests simulate
# per second, so the default is minutes of work and a few GB of memory at most.
DEFAULT_MAX_REQUESTS = 10_000_000
# Every arrival advances every live replica: a run costs about (requests x replicas) / 50
# request-equivalents on top of the requests themselves.
REPLICA_VISITS_PER_REQUEST = 50
MAX_SEQS = 65_536  # --max-seqs and --static-batch: the step-time table holds one entry per seq
MAX_BATCHED_TOKENS = 1 << 24  # tokens per iteration: more than any engine schedules
MAX_SPOT_INTERRUPTIONS_PER_HOUR = 3600.0
PRICE_OPTIONS = {
    "on-demand": "--price-per-hour",
    "spot": "--spot-price-per-hour",
    "reserved": "--reserved-price-per-hour",
}


def parse_duration(option: str, text: str | None, *, positive: bool = False) -> float | None:
    """``2s``, ``200ms``, ``1.5``, ``1m`` -> seconds (at most a week; above 0 if ``positive``)."""
    if text is None:
        return None
    match = DURATION.match(text)
    if not match:
        raise UsageError(f"{option} {shown(text)}: expected a duration such as 2s, 200ms or 1m")
    value = float(match.group(1))
    unit = match.group(2) or "s"
    seconds = value * {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0}[unit]
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise UsageError(f"{option} {shown(text)}: expected a duration of at most 7 days")
    if positive and seconds <= 0:
        raise UsageError(f"{option} {shown(text)}: expected a duration above 0, such as 2s")
    return seconds


def _check_number(
    option: str,
    value: float | None,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    expected: str,
) -> None:
    """A float option (Typer takes 'nan' and 'inf') must be finite and in its range."""
    if value is None:
        return
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    if not (math.isfinite(value) and above and below):
        raise UsageError(f"{option} {value:g}: expected {expected}")


def class_slos(classes: tuple[str, ...], items: list[str], default: SLO) -> dict[str, SLO]:
    """Targets for every class: ``default``, overridden by ``--slo CLASS:ttft=1s,tpot=50ms``
    options."""
    slos: dict[str, SLO] = {name: default for name in classes}
    for item in items:
        name, sep, spec = item.partition(":")
        if not sep or not name:
            raise UsageError(f"--slo {shown(item)}: expected CLASS:ttft=2s,tpot=100ms,e2e=30s")
        targets: dict[str, float | None] = {
            "ttft_s": default.ttft_s,
            "tpot_s": default.tpot_s,
            "e2e_s": default.e2e_s,
        }
        for part in spec.split(","):
            key, eq, value = part.partition("=")
            if key.strip() not in ("ttft", "tpot", "e2e") or not eq:
                raise UsageError(f"--slo {shown(item)}: expected ttft=, tpot= or e2e= targets")
            targets[f"{key.strip()}_s"] = parse_duration(
                f"--slo {shown(name)} {key.strip()}", value, positive=True
            )
        slos[name] = SLO(**targets)
    unknown = [name for name in slos if name not in classes]
    if unknown:
        raise UsageError(
            f"--slo: unknown class {shown(unknown[0])}; "
            f"the workload's classes: {', '.join(classes)}"
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
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST], e.g. batch=5:20"
            ) from None
        rps, size = limits[name]
        if not (sep and name and math.isfinite(rps) and rps > 0):
            raise UsageError(
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST] with RPS a finite "
                "number > 0, BURST >= 1"
            )
        if not (math.isfinite(size) and size >= 1):
            raise UsageError(
                f"--rate-limit {shown(item)}: expected CLASS=RPS[:BURST] with BURST a finite "
                "number >= 1"
            )
    return limits


def _check_rate_limit_classes(
    limits: dict[str, tuple[float, float]], classes: tuple[str, ...]
) -> None:
    unknown = [name for name in limits if name not in classes]
    if unknown:
        raise UsageError(
            f"--rate-limit: unknown class {shown(unknown[0])}; "
            f"the workload's classes: {', '.join(map(printable, classes))}"
        )


def _schedule(text: str | None) -> list[int] | None:
    if text is None:
        return None
    path = Path(text)
    raw = text
    if text.strip() and path.exists():
        if not path.is_file():
            raise UsageError(f"--schedule {shown(text)}: not a file of replica counts")
        try:
            raw = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"--schedule {shown(text)}: cannot read it as a text file of replica counts ({exc})"
            ) from None
    try:
        counts = [int(x) for x in re.split(r"[,\s]+", raw.strip()) if x]
    except ValueError:
        raise UsageError(
            "--schedule: expected replica counts per hour (e.g. 2,2,4,6) or a file of them, "
            f"got {shown(text)}"
        ) from None
    if not counts or min(counts) < 0:
        raise UsageError("--schedule: expected non-negative replica counts, one per hour")
    return counts


def _fleet_size(
    replicas: dict[str, int], schedule: list[int] | None, scaler: Autoscaler | None
) -> int:
    """The most replicas the run may have up at once."""
    if schedule:
        return max(schedule)
    if scaler is not None:
        return max(scaler.max_replicas, scaler.min_replicas)
    return sum(replicas.values())


def _check_work(requests: int, fleet: int, max_requests: int) -> None:
    """Refuse, before the work, a run that would take too long or too much memory."""
    visits = requests * fleet
    if visits > max_requests * REPLICA_VISITS_PER_REQUEST:
        minutes = requests * (1 + fleet / REPLICA_VISITS_PER_REQUEST) / 20_000 / 60
        raise UsageError(
            f"{requests:,} requests through a fleet of up to {fleet:,} replicas is "
            f"{visits:,} replica visits (every arrival visits every replica), over the "
            f"{max_requests * REPLICA_VISITS_PER_REQUEST:,} that --max-requests "
            f"{max_requests:,} allows ({REPLICA_VISITS_PER_REQUEST} per request; about "
            f"{minutes:,.0f} minutes of simulation); use fewer replicas, or raise --max-requests "
            "to run it anyway"
        )


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
    kv_cache: str | None = KV_CACHE_OPTION,
    memory_utilization: float | None = GPU_MEMORY_UTILIZATION_OPTION,
    max_seqs: int | None = typer.Option(
        None,
        "--max-seqs",
        min=1,
        max=MAX_SEQS,
        help="Most sequences per batch (default: the engine's).",
    ),
    max_batched_tokens: int | None = typer.Option(
        None,
        "--max-batched-tokens",
        min=1,
        max=MAX_BATCHED_TOKENS,
        help="Most tokens per iteration (default: the engine's).",
    ),
    no_chunked_prefill: bool = typer.Option(
        False, "--no-chunked-prefill", help="Prefill-first scheduling instead of chunked prefill."
    ),
    policy: str = typer.Option(
        "continuous", "--policy", help="continuous (vLLM-style) or static batching."
    ),
    static_batch: int = typer.Option(
        8, "--static-batch", min=1, max=MAX_SEQS, help="Static batching: batch size."
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
    engine: str = ENGINE_OPTION,
    profile_name: str | None = typer.Option(None, "--profile", help="Calibration profile."),
    seed: int = typer.Option(0, "--seed", min=0, help="Random seed (same seed, same result)."),
    max_requests: int = typer.Option(
        DEFAULT_MAX_REQUESTS,
        "--max-requests",
        min=1,
        help="Refuse, before the work, a run of more requests than this (estimated from the "
        "dataset and --load-scale, or the rates), or of more than 50 x this many replica "
        "visits (requests x replicas); raise it to run a bigger simulation anyway.",
    ),
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
        raise UsageError(f"--policy {shown(policy)}: expected continuous or static")
    # Every number first: Typer takes 'nan' and 'inf' for a float option.
    check_memory_utilization(memory_utilization)
    kv_asked = check_kv_cache(kv_cache)
    spec = get_engine(engine)
    _check_number("--cv", cv, low_open=True, high=100.0, expected="a number in (0, 100]")
    _check_number(
        "--load-scale", load_scale, low_open=True, expected="a positive number (1 replays the log)"
    )
    _check_number(
        "--prefix-hit-rate", prefix_hit_rate, high=1.0, high_open=True, expected="a share in [0, 1)"
    )
    _check_number(
        "--response-cache-hit-rate",
        response_cache_hit_rate,
        high=1.0,
        high_open=True,
        expected="a share in [0, 1)",
    )
    _check_number(
        "--spot-interruptions-per-hour",
        spot_rate,
        high=MAX_SPOT_INTERRUPTIONS_PER_HOUR,
        expected=f"a rate in [0, {MAX_SPOT_INTERRUPTIONS_PER_HOUR:g}] per replica-hour",
    )
    _check_number(
        "--target-utilization",
        target_utilization,
        low_open=True,
        high=1.0,
        expected="a busy share in (0, 1]",
    )
    _check_number(
        "--target-queue",
        target_queue,
        low_open=True,
        high=1e6,
        expected="a positive number of outstanding requests per replica",
    )
    for option, price in (
        ("--price-per-hour", price_per_hour),
        ("--spot-price-per-hour", spot_price_per_hour),
        ("--reserved-price-per-hour", reserved_price_per_hour),
    ):
        _check_number(option, price, expected="a price in $ per replica-hour, 0 or more")
    # Output files: checked before the work, written whole or not at all.
    for option, path in (
        ("--out-requests", out_requests),
        ("--out-summary", out_summary),
        ("--out-timeline", out_timeline),
    ):
        if path is not None:
            check_output_path(path, option)
    if out_requests is not None and out_requests.suffix.lower() not in RequestWriter.SUFFIXES:
        raise UsageError(
            f"--out-requests {shown(str(out_requests))}: unsupported output format "
            f"{shown(out_requests.suffix or '(no suffix)')}; "
            f"supported: {', '.join(RequestWriter.SUFFIXES)}"
        )
    default_slo = SLO(
        parse_duration("--slo-ttft", slo_ttft, positive=True),
        parse_duration("--slo-tpot", slo_tpot, positive=True),
        parse_duration("--slo-e2e", slo_e2e, positive=True),
    )
    serving = ServingSpec(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=tp,
        kv_cache=kv_asked,
        memory_utilization=memory_utilization,
        max_seqs=max_seqs,
        max_batched_tokens=max_batched_tokens,
        chunked_prefill=not no_chunked_prefill,
        policy=policy,
        static_max_batch=static_batch,
        static_max_wait_s=parse_duration("--static-wait", static_wait) or 0.0,
        prefix_caching=not no_prefix_caching,
        prefix_hit_rate=prefix_hit_rate,
        engine=spec.name,
    )
    # Parsed whether or not --autoscale is on: a bad value is an error, never silently unused.
    cold_start_s = parse_duration("--cold-start", cold_start) or 0.0
    warm_start_s = parse_duration("--warm-start", warm_start) or 0.0
    scaler = None
    if autoscale:
        scaler = Autoscaler(
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            target_utilization=None if target_queue is not None else (target_utilization or 0.7),
            target_queue=target_queue,
            cold_start_s=cold_start_s,
            warm_start_s=warm_start_s,
            warm_pool=warm_pool,
        )
    purchase = {
        k: v for k, v in {"on-demand": replicas, "spot": spot, "reserved": reserved}.items() if v
    }
    hourly = _schedule(schedule)
    fleet = FleetConfig(
        replicas=purchase,
        schedule=hourly,
        autoscaler=scaler,
        router=router,
        gpus_per_replica=tp,
        spot_interruptions_per_hour=spot_rate,
        spot_replace_s=parse_duration("--spot-replace", spot_replace) or 0.0,
        rate_limits=_rate_limits(rate_limit),
        response_cache_hit_rate=response_cache_hit_rate,
        seed=seed,
    )
    size = _fleet_size(purchase, hourly, scaler)
    # A fleet bigger than the work allows fails before any request is read.
    _check_work(1, size, max_requests)
    prices = {
        k: v
        for k, v in {
            "on-demand": price_per_hour,
            "spot": spot_price_per_hour,
            "reserved": reserved_price_per_hour,
        }.items()
        if v is not None
    }
    used = ["on-demand"] if hourly or scaler is not None else list(purchase)
    missing = [name for name in used if name not in prices]
    if prices and missing:
        raise UsageError(
            f"the fleet has {missing[0]} replicas but no price for them; give "
            f"{PRICE_OPTIONS[missing[0]]} too (or no prices at all)"
        )
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
                max_requests=max_requests,
            )
        else:
            assert rates is not None
            if tokens_from is None:
                raise UsageError("--rates needs --tokens-from DATASET for request lengths")
            curve = read_rate_curve(rates)
            inputs, outputs = token_pool(session, tokens_from)
            workload = synthetic(
                curve, inputs, outputs, seed=seed, cv=cv, max_requests=max_requests
            )
            if not len(workload):
                raise UsageError(
                    f"the rate curve {shown(str(rates))} asks for {curve.total_requests:g} "
                    f"requests in all over {curve.hours:,} hour(s), and none arrived with seed "
                    f"{seed}" + (f" and --cv {cv:g}" if cv != 1.0 else "") + "; give higher rates"
                )
        profile = engine_profile(session, serving.deployment().gpu.name, spec, profile_name)
    _check_work(len(workload), size, max_requests)
    slos = class_slos(workload.classes, slo, default_slo)
    _check_rate_limit_classes(fleet.rate_limits, workload.classes)
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
        write_text_atomic(
            out_summary, json.dumps(data, indent=2, default=str) + "\n", "--out-summary"
        )
    if out_timeline is not None:
        with atomic_output(out_timeline, "--out-timeline") as temp:
            result.timeline.to_csv(temp, index=False)
    if as_json:
        print_json(data)
        return
    _print(result)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def _share(value: float | None) -> str:
    """A share, or n/a where there is none (no SLO target set)."""
    return "n/a" if value is None else f"{value:.1%}"


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f} req/s"


def _print(result: SimulationResult) -> None:
    s = result.serving
    stdout.print(
        f"[bold]{s['model']}[/] {s['precision']} on {s['tp']} x {s['gpu']} per replica, "
        f"{s['policy']} batching, router {s['router']}, engine {s['engine']}, "
        f"profile {escape(s['profile'])}"
    )
    memory = s["memory"]
    stdout.print(
        f"memory per GPU: {memory['device_gib']:,.1f} GiB, {s['engine']} gives "
        f"{escape(s['memory_rule'])}: weights {memory['weights_gib']:,.1f} GiB, activations "
        f"{memory['activations_gib']:,.1f} GiB, KV cache {memory['kv_cache_gib']:,.1f} GiB = "
        f"{memory['kv_cache_tokens']:,} tokens in {s['kv_cache']} "
        f"({escape(s['kv_cache_source'])}); at most {s['max_seqs']:,} sequences and "
        f"{s['max_batched_tokens']:,} tokens per iteration"
    )
    overall = result.summary["all"]
    stdout.print(
        f"{result.requests:,} requests over {result.simulated_s / 3600:,.2f} h simulated in "
        f"{result.wall_s:,.1f} s ({result.requests / max(result.wall_s, 1e-9):,.0f} requests/s)"
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
        f"SLO attainment {_share(overall['slo_attainment'])}; "
        f"goodput {_rate(overall['goodput_rps'])}; "
        f"throughput {overall['throughput_rps'] or 0:,.2f} req/s, "
        f"{overall['output_tokens_per_s'] or 0:,.0f} output tokens/s"
    )
    fleet = result.fleet
    hours = ", ".join(f"{k} {v:,.1f}" for k, v in fleet.gpu_hours.items()) or "0"
    stdout.print(
        f"fleet: {fleet.launched} replicas launched, peak {fleet.peak_replicas}; "
        f"GPU-hours {hours}; "
        f"spot interruptions {fleet.spot_interruptions}; preemptions {overall['preemptions']:,}"
    )
    if result.cost is not None:
        stdout.print(f"cost: ${result.cost['total']:,.2f}")
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False)
