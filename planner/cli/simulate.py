"""``planner simulate``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from planner.cli.context import print_json, sessions_from, stderr, stdout
from planner.cli.options import (
    ENGINE_OPTION,
    GPU_MEMORY_UTILIZATION_OPTION,
    KV_CACHE_OPTION,
    SCHEDULER_OPTION,
    SIMULATE_ADMISSION_POLICIES,
    SIMULATE_MAX_BATCHED_TOKENS,
    SIMULATE_MAX_REQUESTS,
    SIMULATE_MAX_SEQS,
    SIMULATE_ROUTERS,
    SIMULATE_VLLM_WATERMARK,
)
from planner.cli.tables import Column, compact_width, print_table
from planner.common.files import atomic_output, check_output_path, write_text_atomic
from planner.common.text import shown
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.simulate.inputs import DemandSource, WhatIf
    from planner.simulate.run import SimulationResult

# class_slos and parse_duration stay importable from here, loaded on first use so that
# `planner --help` need not load the simulator.
_LIBRARY_PARSERS = ("class_slos", "parse_duration")


def __getattr__(name: str) -> Any:
    if name in _LIBRARY_PARSERS:
        from planner.simulate import inputs

        return getattr(inputs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def simulate_command(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="Replay an ingested dataset."),
    rates: Path | None = typer.Option(
        None, "--rates", help="Or: hourly request rates (CSV ds,y) for synthetic arrivals."
    ),
    tokens_from: str | None = typer.Option(
        None, "--tokens-from", help="With --rates: dataset whose (input, output) lengths to draw."
    ),
    cv: float | None = typer.Option(
        None,
        "--cv",
        help="With --rates: inter-arrival coefficient of variation (default 1: Poisson; above "
        "1 burstier, a gamma renewal process).",
    ),
    arrival: str | None = typer.Option(
        None,
        "--arrival",
        help="With --rates: how requests arrive at the curve's rates: poisson, constant "
        "(evenly spaced, a benchmark client's fixed interval) or bursty (gamma, inter-arrival "
        "CV --cv, default 2). Default: --cv decides.",
    ),
    clients: int | None = typer.Option(
        None,
        "--clients",
        help="A closed loop instead: N clients on the fixed fleet, each sending its next "
        "request when its last one is back (+ --think-time), as benchmark clients at a "
        "concurrency do; lengths from the workload in order, cycled; --requests of them "
        "(default: as many as the workload has).",
    ),
    think_time: str | None = typer.Option(
        None,
        "--think-time",
        help="With --clients: pause between a response and the client's next request, e.g. "
        "2s (default 0).",
    ),
    client_start: str | None = typer.Option(
        None,
        "--client-start",
        help="With --clients: synchronized (all start together, then run free: vllm bench "
        "serve --max-concurrency, guidellm concurrent), staggered (starts spread over one "
        "request's time: a steady stream) or waves (lock-step, each wave resent together: "
        "GenAI-Perf and AIPerf with identical requests). Default synchronized.",
    ),
    load_scale: float = typer.Option(
        1.0, "--load-scale", help="Scale the replayed load (2.0 doubles it)."
    ),
    start: str | None = typer.Option(None, "--start", help="Replay from this time (ISO 8601)."),
    end: str | None = typer.Option(None, "--end", help="Replay until this time (ISO 8601)."),
    gpu: str = typer.Option(..., "--gpu", help="GPU type of each replica."),
    model: str = typer.Option(
        ...,
        "--model",
        help="Model served (a catalog name or alias). With --dataset (or --tokens-from) of a "
        "log of several models: only the requests logged under this model are used.",
    ),
    model_map: list[str] = typer.Option(
        [],
        "--model-map",
        metavar="LOGNAME=CATALOG",
        help="LOGNAME=CATALOG: a model name as the log has it and the catalog model it is "
        "(repeat, or comma-separate); names the catalog knows need none.",
    ),
    unmapped: str = typer.Option(
        "error",
        "--unmapped",
        metavar="error|skip",
        help="Log model names that map to no catalog model: error (list them) or skip (leave "
        "their requests out; the share is stated).",
    ),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16, fp8, int8, int4-awq."),
    tp: int = typer.Option(1, "--tp", help="GPUs per replica (tensor parallelism)."),
    prefill_replicas: int | None = typer.Option(
        None,
        "--prefill-replicas",
        min=1,
        help="Disaggregated serving: prefill replicas (with --decode-replicas; the prompt's KV "
        "cache then crosses --kv-link to a decode replica).",
    ),
    decode_replicas: int | None = typer.Option(
        None, "--decode-replicas", min=1, help="Disaggregated serving: decode replicas."
    ),
    prefill_tp: int | None = typer.Option(
        None, "--prefill-tp", min=1, help="GPUs per prefill replica (default: --tp)."
    ),
    decode_tp: int | None = typer.Option(
        None, "--decode-tp", min=1, help="GPUs per decode replica (default: --tp)."
    ),
    prefill_gpu: str | None = typer.Option(
        None, "--prefill-gpu", help="GPU type of the prefill replicas (default: --gpu)."
    ),
    decode_gpu: str | None = typer.Option(
        None, "--decode-gpu", help="GPU type of the decode replicas (default: --gpu)."
    ),
    kv_link: str | None = typer.Option(
        None,
        "--kv-link",
        help="What the KV cache crosses (data/catalog/links.csv: a link or instance type, e.g. "
        "aws-p5-efa, p5.48xlarge, nvlink-h100). Default: the GPU's NVLink when both roles fit "
        "one node.",
    ),
    first_token: str | None = typer.Option(
        None,
        "--first-token",
        metavar="decode|prefill",
        help="Which role yields the first token: decode (vLLM's connector: TTFT includes a "
        "decode step) or prefill (SGLang, TensorRT-LLM). Default: by engine.",
    ),
    kv_cache: str | None = KV_CACHE_OPTION,
    memory_utilization: float | None = GPU_MEMORY_UTILIZATION_OPTION,
    max_seqs: int | None = typer.Option(
        None,
        "--max-seqs",
        min=1,
        max=SIMULATE_MAX_SEQS,
        help="Most sequences per batch (default: the engine's).",
    ),
    max_batched_tokens: int | None = typer.Option(
        None,
        "--max-batched-tokens",
        min=1,
        max=SIMULATE_MAX_BATCHED_TOKENS,
        help="Most tokens per iteration (default: the engine's).",
    ),
    no_chunked_prefill: bool = typer.Option(
        False, "--no-chunked-prefill", help="Prefill-first scheduling instead of chunked prefill."
    ),
    policy: str = typer.Option(
        "continuous", "--policy", help="continuous (vLLM-style) or static batching."
    ),
    static_batch: int = typer.Option(
        8, "--static-batch", min=1, max=SIMULATE_MAX_SEQS, help="Static batching: batch size."
    ),
    static_wait: str = typer.Option(
        "50ms", "--static-wait", help="Static batching: longest wait for a batch to fill."
    ),
    admission: str | None = typer.Option(
        None,
        "--admission",
        help=f"Admission policy: {' or '.join(SIMULATE_ADMISSION_POLICIES)} (default: the "
        "engine's; no_evict admits a request only when its whole prompt and output fit the KV "
        "cache and never preempts, as TensorRT-LLM; preempt admits while the prompt fits and "
        "preempts by recomputation, as vLLM and SGLang).",
    ),
    scheduler: str | None = SCHEDULER_OPTION,
    kv_watermark: float | None = typer.Option(
        None,
        "--kv-watermark",
        help="With preempt admission: share of the KV cache a prompt must leave free to be "
        f"admitted (default {SIMULATE_VLLM_WATERMARK:g}, vLLM's; 0 fills it to the last block).",
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
    router: str = typer.Option(
        "least-requests", "--router", help=f"Router: {', '.join(SIMULATE_ROUTERS)}."
    ),
    rate_limit: list[str] = typer.Option(
        [], "--rate-limit", help="Admission control per class: CLASS=RPS[:BURST]."
    ),
    response_cache_hit_rate: float = typer.Option(
        0.0,
        "--response-cache-hit-rate",
        help="Share of requests answered from an exact-match cache.",
    ),
    api_overflow_queue: int | None = typer.Option(
        None,
        "--api-overflow-queue",
        help="Put a per-token API behind the fleet: an arrival goes to it when every replica "
        "up holds N or more outstanding requests (0: every arrival), unless its rate limit is "
        "spent. The result says how many requests and tokens it took; its requests count in the "
        "latency percentiles (replica -2 in --out-requests).",
    ),
    api_ttft: str | None = typer.Option(
        None, "--api-ttft", help="The API's median time to first token, e.g. 500ms (default 0.5 s)."
    ),
    api_tpot: str | None = typer.Option(
        None, "--api-tpot", help="The API's median time per output token, e.g. 12ms (default)."
    ),
    api_rpm: float | None = typer.Option(
        None, "--api-rpm", help="The API's rate limit, requests a minute (default none)."
    ),
    api_tpm: float | None = typer.Option(
        None, "--api-tpm", help="The API's rate limit, tokens a minute (default none)."
    ),
    api_price: str | None = typer.Option(
        None,
        "--api-price",
        metavar="PROVIDER/OFFER",
        help="Price the API's tokens with this offer's price in force (`planner prices list "
        "--kind api`), beside the fleet's GPU cost.",
    ),
    api_provider: str | None = typer.Option(
        None,
        "--api-provider",
        help="Or: price them with this provider's best offer for --model.",
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
        SIMULATE_MAX_REQUESTS,
        "--max-requests",
        min=1,
        help="Refuse, before the work, a run of more requests than this (estimated from the "
        "dataset and --load-scale, or the rates), or a fleet of more than one replica per 100 "
        "of them; raise it to run a bigger simulation anyway.",
    ),
    requests: int | None = typer.Option(
        None,
        "--requests",
        help="Simulate only the first N requests of the workload (after --start/--end); the "
        "output says N of how many.",
    ),
    max_model_len: int | None = typer.Option(
        None,
        "--max-model-len",
        help="The engine's longest prompt, in tokens: longer prompts are cut or refused (see "
        "--over-length); the output says how many. Default: no limit, as before (the "
        "simulator does not apply the model's context length).",
    ),
    over_length: str = typer.Option(
        "truncate",
        "--over-length",
        help="A prompt over --max-model-len: truncate (cut to it, as engines that truncate "
        "do; output lengths kept) or refuse (the request is rejected and counted as failed).",
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
    confidence: str = typer.Option(
        "0.9",
        "--confidence",
        help="Each latency percentile with its interval at this confidence (model error held "
        "out, from $PLANNER_ACCURACY or data/calibration/accuracy.json, plus the sampling "
        "error of the requests simulated); default 0.9; 0 or none: no intervals.",
    ),
) -> None:
    """Simulate a fleet serving a request stream: latency percentiles, SLO attainment, cost."""
    from planner.latency.uncertainty import parse_confidence
    from planner.simulate import inputs
    from planner.usecases.simulate import (
        ClientLoad,
        SimulateRequest,
        check_requests_out,
        simulate,
    )

    # Output files: checked before the work, written whole or not at all.
    check_requests_out(out_requests)
    level = parse_confidence(confidence)
    for option, path in (("--out-summary", out_summary), ("--out-timeline", out_timeline)):
        if path is not None:
            check_output_path(path, option)
    whatif = _whatif(dict(locals()))
    load = None
    if clients is not None:
        inputs.check_closed_loop(whatif, arrival_given=arrival is not None, cv_given=cv is not None)
        think = inputs.parse_duration("--think-time", think_time) or 0.0
        load = ClientLoad(clients, think, (client_start or "synchronized").strip().lower())
    elif think_time is not None or client_start is not None:
        raise UsageError("--think-time and --client-start describe --clients; give --clients N")
    request = SimulateRequest(whatif, out_requests, confidence=level, clients=load)
    with _progress_bar(quiet) as progress, sessions_from(ctx) as sessions:
        done = simulate(request, sessions, progress=progress)
    _write_outputs(done.simulation, out_summary, out_timeline, as_json)


def _whatif(p: dict[str, Any]) -> WhatIf:
    """The what-if ``simulate_command``'s options describe (``p``: its parameters by name);
    every duration and the arrival process parsed here, a bad one named by its option."""
    from planner.simulate import inputs
    from planner.simulate.metrics import SLO
    from planner.simulate.run import ServingSpec

    duration = inputs.parse_duration
    serving = ServingSpec(
        gpu=p["gpu"],
        model=p["model"],
        precision=p["precision"],
        tp=p["tp"],
        kv_cache=p["kv_cache"],
        memory_utilization=p["memory_utilization"],
        max_seqs=p["max_seqs"],
        max_batched_tokens=p["max_batched_tokens"],
        chunked_prefill=not p["no_chunked_prefill"],
        policy=p["policy"],
        static_max_batch=p["static_batch"],
        static_max_wait_s=duration("--static-wait", p["static_wait"]) or 0.0,
        prefix_caching=not p["no_prefix_caching"],
        prefix_hit_rate=p["prefix_hit_rate"],
        engine=p["engine"],
        admission=p["admission"],
        kv_watermark=p["kv_watermark"],
        scheduler=p["scheduler"],
    )
    hourly = inputs.parse_schedule(p["schedule"])
    # Durations parsed whether or not --autoscale is on: a bad value is an error, never unused.
    fleet = inputs.FleetSettings(
        replicas=p["replicas"],
        spot=p["spot"],
        reserved=p["reserved"],
        schedule=tuple(hourly) if hourly is not None else None,
        autoscale=p["autoscale"],
        min_replicas=p["min_replicas"],
        max_replicas=p["max_replicas"],
        target_utilization=p["target_utilization"],
        target_queue=p["target_queue"],
        cold_start_s=duration("--cold-start", p["cold_start"]) or 0.0,
        warm_start_s=duration("--warm-start", p["warm_start"]) or 0.0,
        warm_pool=p["warm_pool"],
        spot_interruptions_per_hour=p["spot_rate"],
        spot_replace_s=duration("--spot-replace", p["spot_replace"]) or 0.0,
        router=p["router"],
        rate_limits=inputs.parse_rate_limits(p["rate_limit"]),
        response_cache_hit_rate=p["response_cache_hit_rate"],
        api=_api(p),
    )
    demand = _demand(p)
    return inputs.WhatIf(
        serving=serving,
        demand=demand,
        fleet=fleet,
        prices=inputs.ReplicaPrices(
            p["price_per_hour"], p["spot_price_per_hour"], p["reserved_price_per_hour"]
        ),
        slo=SLO(
            duration("--slo-ttft", p["slo_ttft"], positive=True),
            duration("--slo-tpot", p["slo_tpot"], positive=True),
            duration("--slo-e2e", p["slo_e2e"], positive=True),
        ),
        class_slos=tuple(p["slo"]),
        profile=p["profile_name"],
        seed=p["seed"],
        max_requests=p["max_requests"],
        requests=p["requests"],
        max_model_len=p["max_model_len"],
        over_length=p["over_length"],
        disaggregation=_disaggregation(p),
    )


def _api(p: dict[str, Any]) -> Any:
    """The API behind the fleet, as ``simulate_command``'s options describe it (None: no
    --api-overflow-queue); an API setting without it is refused."""
    from planner.simulate import inputs

    settings = ("api_ttft", "api_tpot", "api_rpm", "api_tpm", "api_price", "api_provider")
    if p["api_overflow_queue"] is None:
        given = next((k for k in settings if p[k] is not None), None)
        if given is not None:
            raise UsageError(
                f"--{given.replace('_', '-')} describes the API behind the fleet: give "
                "--api-overflow-queue N to put one there"
            )
        return None
    ttft = inputs.parse_duration("--api-ttft", p["api_ttft"], positive=True)
    tpot = inputs.parse_duration("--api-tpot", p["api_tpot"], positive=True)
    api = inputs.ApiOverflow(
        queue=p["api_overflow_queue"],
        ttft_s=inputs.DEFAULT_API_TTFT_S if ttft is None else ttft,
        tpot_s=inputs.DEFAULT_API_TPOT_S if tpot is None else tpot,
        rpm=p["api_rpm"],
        tpm=p["api_tpm"],
        price=p["api_price"],
        provider=p["api_provider"],
    )
    inputs.check_api(api)
    return api


def _disaggregation(p: dict[str, Any]) -> Any:
    """Prefill and decode apart, as ``simulate_command``'s options describe them (None:
    aggregated replicas); a role's option without both replica counts is refused."""
    from planner.simulate.inputs import Disaggregation

    roles = ("prefill_tp", "decode_tp", "prefill_gpu", "decode_gpu", "kv_link", "first_token")
    if p["prefill_replicas"] is not None or p["decode_replicas"] is not None:
        if p["prefill_replicas"] is None or p["decode_replicas"] is None:
            raise UsageError(
                "a disaggregated run takes both --prefill-replicas and --decode-replicas"
            )
        return Disaggregation(p["prefill_replicas"], p["decode_replicas"], *(p[k] for k in roles))
    if any(p[k] is not None for k in roles):
        given = next(k for k in roles if p[k] is not None)
        raise UsageError(
            f"--{given.replace('_', '-')} describes a disaggregated run: give --prefill-replicas "
            "and --decode-replicas too"
        )
    return None


def _demand(p: dict[str, Any]) -> DemandSource:
    """What arrives, as ``simulate_command``'s options describe it: the replayed dataset (or
    rate curve and lengths), and how a log's model names map to catalog models."""
    from planner.simulate import inputs
    from planner.workload.model_names import UNMAPPED_CHOICES, parse_model_map

    dataset, rates = p["dataset"], p["rates"]
    cv, constant = inputs.arrival_process(p["arrival"], p["cv"], has_rates=rates is not None)
    window = _window(p["start"], p["end"]) if dataset is not None else (None, None)
    unmapped = (p["unmapped"] or "").strip().lower()
    if unmapped not in UNMAPPED_CHOICES:
        raise UsageError(
            f"--unmapped {shown(p['unmapped'])}: expected {' or '.join(UNMAPPED_CHOICES)}"
        )
    return inputs.DemandSource(
        dataset,
        rates,
        None,
        p["tokens_from"],
        cv,
        p["load_scale"],
        *window,
        constant,
        model_map=parse_model_map(p["model_map"] or []),
        unmapped=unmapped,
    )


def _window(start: str | None, end: str | None) -> tuple[datetime | None, datetime | None]:
    """--start and --end of a replay (the ingest's time parser is loaded only for one)."""
    if start is None and end is None:
        return None, None
    from planner.ingest.options import parse_start

    return parse_start(start, "--start"), parse_start(end, "--end")


@contextmanager
def _progress_bar(quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr, updated with (requests simulated, requests in all); None when
    quiet or not a terminal (Rich's progress module is then not loaded)."""
    if quiet or not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("simulate", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def _write_outputs(
    result: SimulationResult, out_summary: Path | None, out_timeline: Path | None, as_json: bool
) -> None:
    data = result.to_dict()
    if out_summary is not None:
        write_text_atomic(
            out_summary, json.dumps(data, indent=2, default=str) + "\n", "--out-summary"
        )
    if out_timeline is not None:
        from planner.common.csvsafe import safe_frame

        with atomic_output(out_timeline, "--out-timeline") as temp:
            safe_frame(result.timeline).to_csv(temp, index=False)
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


_LATENCIES = (
    ("ttft", "time to first token"),
    ("tpot", "time per output token"),
    ("e2e", "end-to-end"),
)
_QUANTILES = ("p50", "p90", "p95", "p99", "max", "mean")


def _latency_columns(overall: dict[str, Any], unit: str, inline: bool = True) -> list[Column]:
    """The latency table's columns: each percentile with its interval in brackets
    (``inline``), or the intervals on a row of their own under each latency."""
    cell = _ms if unit == "ms" else _s
    rows: list[tuple[str, dict[str, Any], bool]] = []  # label, stats, the interval row
    for key, label in _LATENCIES:
        rows.append((label, overall[key], False))
        intervals = overall[key].get("interval")
        if not inline and intervals:
            level = next(iter(intervals.values()))["confidence"]
            rows.append((f"  {level:.0%} interval", overall[key], True))
    columns = [Column(f"latency ({unit})", [label for label, _, _ in rows], wrap=True)]
    for q in _QUANTILES:
        cells = [_cell(stats, q, cell, inline, bounds) for _, stats, bounds in rows]
        columns.append(Column(q.upper() if q.startswith("p") else q, cells, justify="right"))
    return columns


def _cell(
    stats: dict[str, Any], q: str, cell: Callable[[Any], str], inline: bool, bounds: bool
) -> str:
    """A percentile, with its interval in brackets when ``inline`` (``812.0 (704.1-951.3)``,
    an en dash); ``bounds``: the interval alone (its own row)."""
    interval = (stats.get("interval") or {}).get(q)
    if bounds:
        return "" if interval is None else f"{cell(interval['low'])}\u2013{cell(interval['high'])}"
    if interval is None or not inline:
        return cell(stats.get(q))
    return f"{cell(stats.get(q))} ({cell(interval['low'])}\u2013{cell(interval['high'])})"


def _print_latencies(overall: dict[str, Any]) -> None:
    """The latency table in ms, intervals in brackets; where that would not fit the terminal
    whole, the intervals on rows of their own; then in seconds; then the table without them,
    the intervals on lines below it."""
    for unit, inline in (("ms", True), ("ms", False), ("s", False)):
        columns = _latency_columns(overall, unit, inline)
        if compact_width(columns) <= stdout.width:
            print_table(columns)
            return
    stripped = {key: {**overall[key], "interval": None} for key, _ in _LATENCIES}
    columns = _latency_columns(stripped, "ms")
    if compact_width(columns) > stdout.width:
        columns = _latency_columns(stripped, "s")
    print_table(columns)
    for key, label in _LATENCIES:
        intervals = overall[key].get("interval") or {}
        if intervals:
            stdout.print(
                f"{label}, intervals (s): "
                + ", ".join(
                    f"{q.upper()} {_s(i['low'])}\u2013{_s(i['high'])}" for q, i in intervals.items()
                ),
                markup=False,
            )


def _s(value: Any) -> str:
    """Seconds, to the ms below 10 s, to 0.1 s below 10,000 s, whole above."""
    if value is None:
        return "-"
    return f"{value:,.{3 if abs(value) < 10 else 1 if abs(value) < 10_000 else 0}f}"


def _print_roles(result: SimulationResult) -> None:
    """A disaggregated run: each role's deployment and pool, the KV transfer (time, its share
    of TTFT, the wait for a free link) and the wait for decode room."""
    d = result.disaggregation
    assert d is not None
    for pool in d["pools"]:
        s = result.serving[pool["role"]]
        fleet = pool["fleet"]
        cost = f", ${pool['cost']['total']:,.2f}" if pool.get("cost") else ""
        stdout.print(
            f"[bold]{pool['role']}[/]: {fleet['launched']} x {s['tp']} x {s['gpu']} "
            f"{s['precision']}, KV cache {s['kv_capacity_tokens']:,} tokens, at most "
            f"{s['max_seqs']:,} sequences, {s['max_batched_tokens']:,} tokens per iteration; "
            f"queued at most {pool['queued_peak']:,.1f} (a 60 s mean){cost}"
        )
    t, share, wait = d["transfer_s"], d["transfer_share_of_ttft"], d["transfer_wait_s"]
    stdout.print(
        f"KV transfer over {escape(d['link'])} ({escape(d['link_transport'])}), "
        f"{d['kv_bytes_per_prompt_token'] / 1024:,.0f} KiB per prompt token: P50 {_ms(t['p50'])} "
        f"ms, P99 {_ms(t['p99'])} ms; waiting for a free link P99 {_ms(wait['p99'])} ms; "
        f"{_share(share['p50'])} of TTFT at the median (first token from the "
        f"{d['first_token']} side)"
    )
    dw = d["decode_wait_s"]
    stdout.print(
        f"decode: from the KV cache's arrival to the first decode step's end P50 "
        f"{_ms(dw['p50'])} ms, P99 {_ms(dw['p99'])} ms (beyond one decode step: held for room)"
    )


def _print(result: SimulationResult) -> None:
    if result.disaggregation is not None:
        _print_roles(result)
        _print_summary(result)
        return
    s = result.serving
    stdout.print(
        f"[bold]{s['model']}[/] {s['precision']} on {s['tp']} x {s['gpu']} per replica, "
        f"{s['policy']} batching, router {s['router']}, engine {s['engine']}, "
        f"profile {escape(s['profile'])}"
    )
    if s["policy"] == "continuous":
        watermark = (
            f", {s['kv_watermark']:.0%} of the KV cache kept free at admission"
            if s["admission"] == "preempt"
            else ""
        )
        stdout.print(
            f"admission {s['admission']}, from {escape(s['admission_source'])}{watermark}",
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
    _print_summary(result)


def _print_summary(result: SimulationResult) -> None:
    overall = result.summary["all"]
    if result.load_model is not None:
        stdout.print(f"load: {escape(result.load_model)}")
    if result.available_requests is not None and result.available_requests > result.requests:
        stdout.print(
            f"simulated {result.requests:,} of {result.available_requests:,} requests (--requests)"
        )
    stdout.print(
        f"{result.requests:,} requests over {result.simulated_s / 3600:,.2f} h simulated in "
        f"{result.wall_s:,.1f} s ({result.requests / max(result.wall_s, 1e-9):,.0f} requests/s)"
    )
    _print_latencies(overall)
    bars = result.summary.get("error_bars")
    if bars is not None:
        group = overall["ttft"].get("interval", {}).get("p99", {}).get("error_group", {})
        stdout.print(
            f"intervals at {bars['confidence']:.0%} confidence: the model's held-out error "
            f"for {escape(bars['engine'])} on {escape(bars['gpu_class'])} (P99 TTFT: "
            f"{escape(str(group.get('group', '-')))}, {escape(str(group.get('how', '-')))}) "
            "and the sampling error of the requests simulated (--confidence 0: none)",
        )
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
        f"fleet: {fleet.launched} replica{'' if fleet.launched == 1 else 's'} launched, "
        f"peak {fleet.peak_replicas}; "
        f"GPU-hours {hours}; "
        f"spot interruptions {fleet.spot_interruptions}; preemptions {overall['preemptions']:,}"
    )
    if result.cost is not None:
        stdout.print(f"cost: ${result.cost['total']:,.2f}")
    _print_api(result.summary.get("api"))
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False)


def _print_api(api: dict[str, Any] | None) -> None:
    """The API behind the fleet: what it took, what its rate limit sent back, its cost."""
    if api is None:
        return
    limits = ", ".join(
        f"{api[k]:,.0f} {unit} a minute"
        for k, unit in (("rpm", "requests"), ("tpm", "tokens"))
        if api[k] is not None
    )
    stdout.print(
        f"API behind the fleet (at {api['queue']:,} outstanding per replica; TTFT "
        f"{_ms(api['ttft_s'])} ms, TPOT {_ms(api['tpot_s'])} ms; rate limit "
        f"{limits or 'none'}): {api['requests']:,} requests ({_share(api['share'])}), "
        f"{api['input_tokens']:,} input and {api['output_tokens']:,} output tokens "
        f"({_share(api['token_share'])} of the tokens); {api['rate_limited']:,} sent back to "
        "the replicas by its rate limit; the percentiles above include its requests",
        markup=False,
    )
    price = api["price"]
    if price is not None:
        fleet = "-" if api["fleet_cost_usd"] is None else f"${api['fleet_cost_usd']:,.2f}"
        total = "-" if api["total_usd"] is None else f"${api['total_usd']:,.2f}"
        stdout.print(
            f"API cost: ${api['cost_usd']:,.2f} at {price['provider']} {price['offer']} "
            f"(${price['input_usd_per_mtok']:,.2f} in, ${price['output_usd_per_mtok']:,.2f} out "
            f"per million tokens, {price['source_date']}); fleet GPU cost {fleet}; total {total}",
            markup=False,
        )
