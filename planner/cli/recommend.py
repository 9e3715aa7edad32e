"""``planner recommend`` and ``planner recommendations list|show``."""

from __future__ import annotations

import json
import math
import re
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from planner.cli.context import print_json, sessions_from, stderr, stdout, user_errors
from planner.cli.options import (
    ENGINE_OPTION,
    GPU_MEMORY_UTILIZATION_OPTION,
    KV_CACHE_OPTION,
    RECOMMEND_MAX_REQUESTS,
    RECOMMEND_PRECISIONS,
    SCHEDULER_OPTION,
)
from planner.cli.tables import Column, print_table
from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import printable, shown
from planner.errors import PlannerError, StoreError, UsageError
from pricing.model import PurchaseOption

if TYPE_CHECKING:
    from planner.recommend.engine import Recommendation
    from planner.recommend.inputs import Constraints
    from planner.recommend.sweep import StageProgress
    from planner.simulate.metrics import SLO
    from planner.usecases.recommend import DemandChoice, RecommendResult


MAX_MIN_REPLICAS = 10_000
MAX_SEQS_LIMIT = 16_384
MAX_TP = 1_024


class NoFleetError(PlannerError):
    """Nothing met the targets: the result is printed, the exit is non-zero."""


def _items(values: list[str], option: str = "") -> list[str]:
    """Repeatable options that also take comma lists: ``--gpu L4,A10G --gpu H100``. An option
    given with nothing in it (``--gpu ,``) is refused rather than read as "any"."""
    items = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if values and not items and option:
        raise UsageError(f"{option} {shown(','.join(values))}: name at least one value")
    return items


def _ints(option: str, values: list[str], default: tuple[int, ...], most: int) -> tuple[int, ...]:
    items = _items(values, option)
    if not items:
        return default
    try:
        numbers = tuple(int(v) for v in items)
    except ValueError:
        bad = next(v for v in items if not re.fullmatch(r"[+-]?\d+", v))
        raise UsageError(f"{option} {shown(bad)}: expected whole numbers such as 1,2,4") from None
    for number in numbers:
        if not 1 <= number <= most:
            raise UsageError(f"{option} {number}: expected a number from 1 to {most:,}")
    return numbers


def _purchase(values: list[str], max_spot_share: float) -> tuple[PurchaseOption, ...]:
    from planner.recommend.inputs import DEFAULT_PURCHASE
    from pricing.entries import option_filter

    items = _items(values, "--purchase")
    if not items:
        return DEFAULT_PURCHASE
    chosen: list[PurchaseOption] = []
    for item in items:
        try:
            options = option_filter(item) or ()
        except UsageError as exc:
            raise UsageError(str(exc).replace("--option:", "--purchase:", 1)) from None
        if options == (PurchaseOption.SPOT,) and max_spot_share <= 0:
            raise UsageError(
                f"--purchase {shown(item)}: spot also needs --max-spot-share (the share of the "
                "load above commitments that may run on spot, e.g. 0.5)"
            )
        for option in options:
            if option not in chosen:
                chosen.append(option)
    if PurchaseOption.ON_DEMAND not in chosen:
        chosen.insert(0, PurchaseOption.ON_DEMAND)
    return tuple(chosen)


def _number(
    option: str,
    value: float | None,
    expected: str,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
) -> None:
    """Refuse NaN, infinities and values out of ``[low, high]`` (``(low, high]``), naming the
    option: Typer reads 'nan' and 'inf' as floats."""
    if value is None:
        return
    above = value > low if low_open else value >= low
    if not (math.isfinite(value) and above and value <= high):
        raise UsageError(f"{option} {value:g}: expected {expected}")


def _check_numbers(
    load_scale: float,
    min_attainment: float | None,
    max_quality_loss: float | None,
    max_spot_share: float,
    spot_rate: float,
    budget: float | None,
    tighten_margin: float,
) -> None:
    _number(
        "--load-scale",
        load_scale,
        "a positive number (1: the load as it is, 1.5: 50% more)",
        low=0,
        low_open=True,
    )
    _number(
        "--min-attainment",
        min_attainment,
        "a share of requests above 0 and at most 1, e.g. 0.99",
        low=0,
        high=1,
        low_open=True,
    )
    _number(
        "--max-quality-loss",
        max_quality_loss,
        "accuracy points from 0 (full precision only) to 100",
        low=0,
        high=100,
    )
    _number("--max-spot-share", max_spot_share, "a share from 0 to 1", low=0, high=1)
    _number(
        "--spot-interruptions-per-hour",
        spot_rate,
        "interruptions per instance-hour, from 0 to 60",
        low=0,
        high=60,
    )
    _number(
        "--budget",
        budget,
        "a positive number of dollars a month",
        low=0,
        low_open=True,
    )
    _number("--tighten-margin", tighten_margin, "a share of load from 0 to 1", low=0, high=1)


def _chunked(value: str) -> tuple[bool, ...]:
    choices = {"both": (True, False), "on": (True,), "off": (False,)}
    if value not in choices:
        raise UsageError(f"--chunked-prefill {shown(value)}: expected both, on or off")
    return choices[value]


def _demand(
    dataset: str | None,
    demand: str | None,
    tokens_from: str | None,
    load_scale: float,
    start: str | None,
    end: str | None,
) -> DemandChoice:
    """``--dataset`` or ``--demand FORECAST_ID|CSV`` as the demand to plan for."""
    from planner.ingest.options import parse_start
    from planner.usecases.recommend import DemandChoice

    if (dataset is None) == (demand is None):
        raise UsageError(
            "give exactly one of --dataset NAME (plan for a logged load) or --demand "
            "FORECAST_ID|CSV (plan for a forecast's demand curve)"
        )
    if dataset is not None and not dataset.strip():
        raise UsageError("--dataset is empty: name an ingested dataset (`planner datasets list`)")
    if demand is not None and not demand.strip():
        raise UsageError("--demand is empty: give a stored forecast's id or a CSV path (ds,y)")
    if dataset is not None:
        if tokens_from is not None:
            raise UsageError(
                "--tokens-from goes with --demand: --dataset replays its own requests, lengths "
                "included"
            )
        window = (parse_start(start, "--start"), parse_start(end, "--end"))
        return DemandChoice(dataset=dataset, load_scale=load_scale, window=window)
    assert demand is not None
    if start is not None or end is not None:
        raise UsageError(
            "--start and --end pick a window of --dataset; a --demand curve is planned whole"
        )
    if re.fullmatch(r"#?\d+", demand.strip()) and not Path(demand).exists():
        forecast_id = int(demand.strip().lstrip("#"))
        return DemandChoice(forecast_id=forecast_id, tokens_from=tokens_from, load_scale=load_scale)
    ids = [part.strip().lstrip("#") for part in demand.split(",")]
    if len(ids) > 1 and all(i.isdigit() for i in ids) and not Path(demand).exists():
        # one forecast per model of a log: a fleet of the forecasts' models
        if tokens_from is not None:
            raise UsageError(
                "--tokens-from: with several forecasts each model's lengths come from its own "
                "requests in the dataset its forecast was fitted on"
            )
        return DemandChoice(
            forecast_id=int(ids[0]),
            forecast_ids=tuple(int(i) for i in ids),
            load_scale=load_scale,
        )
    return DemandChoice(csv=demand, tokens_from=tokens_from, load_scale=load_scale)


@dataclass(frozen=True)
class ConstraintOptions:
    """The options that say what may be bought and run, as given."""

    model: str
    provider: list[str]
    region: list[str]
    gpu: list[str]
    instance_type: list[str]
    precision: list[str]
    max_quality_loss: float | None
    tp: list[str]
    max_tp: int
    max_seqs: list[str]
    chunked_prefill: str
    kv_cache: str | None
    memory_utilization: float | None
    purchase: list[str]
    max_spot_share: float
    spot_class: list[str]
    spot_rate: float
    budget: float | None
    min_replicas: int
    scheduler: str | None = None


def _constraints(given: ConstraintOptions, engine: str, every_model: bool = False) -> Constraints:
    from planner.latency.predict import check_kv_cache
    from planner.recommend.inputs import (
        DEFAULT_MAX_SEQS,
        DEFAULT_PRECISIONS,
        DEFAULT_TP,
        Constraints,
    )

    models = _items([given.model])
    if not models and not every_model:
        raise UsageError("--model: name the model to serve (`planner catalog models`)")
    models = models or [""]  # every model of the log: each replaces it in its own search
    spot_classes = tuple(_items(given.spot_class, "--spot-class"))
    if spot_classes and given.max_spot_share <= 0:
        raise UsageError(
            "--spot-class names the classes that may run on spot: give --max-spot-share too "
            "(the share of the load above commitments that may, e.g. 0.5)"
        )
    return Constraints(
        model=models[0],
        alternative_models=tuple(models[1:]),
        providers=tuple(p.lower() for p in _items(given.provider, "--provider")),
        regions=tuple(_items(given.region, "--region")),
        gpus=tuple(_items(given.gpu, "--gpu")),
        instance_types=tuple(_items(given.instance_type, "--instance-type")),
        precisions=tuple(_items(given.precision, "--precision")) or DEFAULT_PRECISIONS,
        max_quality_loss_pct=given.max_quality_loss,
        tp_degrees=_ints("--tp", given.tp, DEFAULT_TP, MAX_TP),
        max_tp=given.max_tp,
        max_seqs=_ints("--max-seqs", given.max_seqs, DEFAULT_MAX_SEQS, MAX_SEQS_LIMIT),
        chunked_prefill=_chunked(given.chunked_prefill),
        kv_cache=check_kv_cache(given.kv_cache),
        engine=engine,
        scheduler=given.scheduler,
        memory_utilization=given.memory_utilization,
        purchase_options=_purchase(given.purchase, given.max_spot_share),
        max_spot_share=given.max_spot_share,
        spot_classes=spot_classes,
        spot_interruptions_per_hour=given.spot_rate,
        budget_usd_per_month=given.budget,
        min_replicas=given.min_replicas,
    )


def _size_buckets(value: str | None, every_model: bool) -> tuple[int, ...] | None:
    """--size-buckets: boundaries, `default`, or `none` (None: the search's default for the
    number of models)."""
    from planner.recommend.mix import DEFAULT_SIZE_BUCKETS

    text = (value or "").strip().lower()
    if not text:
        return DEFAULT_SIZE_BUCKETS if every_model else None
    if text == "default":
        return DEFAULT_SIZE_BUCKETS
    if text == "none":
        return () if every_model else None
    bounds = _ints("--size-buckets", [text], (), 10_000_000)
    if list(bounds) != sorted(set(bounds)):
        raise UsageError(
            f"--size-buckets {shown(value or '')}: expected increasing input-token boundaries, "
            "e.g. 512,2048,8192"
        )
    return bounds


def _check_runner(dask: str | None, workers: int) -> None:
    from planner.recommend.verify import max_local_workers

    if dask is not None and not dask.strip():
        raise UsageError("--dask is empty: give a scheduler address (tcp://host:8786) or 'local'")
    if dask in (None, "local") and workers > max_local_workers():
        raise UsageError(
            f"--workers {workers}: at most {max_local_workers()} local processes on this machine "
            f"(4 per core; a simulation keeps a core busy); use --dask SCHEDULER for more"
        )


def _default_slo(ttft: str | None, tpot: str | None, e2e: str | None) -> SLO:
    from planner.simulate.inputs import parse_duration
    from planner.simulate.metrics import SLO

    return SLO(
        parse_duration("--slo-ttft-p99", ttft),
        parse_duration("--slo-tpot-p99", tpot),
        parse_duration("--slo-e2e-p99", e2e),
    )


@dataclass(frozen=True)
class Outputs:
    """Where the result goes besides the screen: files checked before the work, never found
    unwritable after it."""

    out: Path | None
    plot: Path | None
    rows: int
    as_json: bool

    def check(self) -> None:
        if self.out is not None:
            check_output_path(self.out, "--out")
        if self.plot is not None:
            check_output_path(self.plot, "--plot")
            if self.out is not None and self.out.resolve() == self.plot.resolve():
                raise UsageError(f"--out and --plot name the same file {shown(str(self.out))}")


def recommend_command(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="Plan for an ingested dataset."),
    demand: str | None = typer.Option(
        None, "--demand", help="Or: a stored forecast's id, or a demand curve CSV (ds,y)."
    ),
    tokens_from: str | None = typer.Option(
        None, "--tokens-from", help="Dataset whose request lengths to draw (with --demand)."
    ),
    load_scale: float = typer.Option(1.0, "--load-scale", help="Scale the load (1.5: +50%)."),
    start: str | None = typer.Option(None, "--start", help="With --dataset: from this time."),
    end: str | None = typer.Option(None, "--end", help="With --dataset: until this time."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model to serve (`planner catalog models`); a comma list allows alternatives "
        "(the first is preferred on a cost tie). With --dataset of a log naming several models: "
        "only this model's requests; left out, every model of the log, each on its own pools.",
    ),
    model_map: list[str] = typer.Option(
        [],
        "--model-map",
        help="LOGNAME=CATALOG: the catalog model a log's model name is (repeatable; names "
        "and common aliases map by themselves).",
    ),
    unmapped: str = typer.Option(
        "error",
        "--unmapped",
        help="Log model names that map to no catalog model: error (list them) or skip (leave "
        "their requests out, the share stated).",
    ),
    colocate: bool = typer.Option(
        True,
        "--colocate/--no-colocate",
        help="In a fleet, try small, quiet models on one instance together (their memory "
        "split, their interference simulated).",
    ),
    size_buckets: str | None = typer.Option(
        None,
        "--size-buckets",
        help="Input-token boundaries splitting each model's requests across GPU types, e.g. "
        "512,2048,8192 (`default`: those; `none`: one pool per model). Default: none for one "
        "model, default for a log of several.",
    ),
    slo_ttft: str | None = typer.Option(
        None, "--slo-ttft-p99", help="P99 time to first token target, e.g. 2s."
    ),
    slo_tpot: str | None = typer.Option(
        None, "--slo-tpot-p99", help="P99 time per output token target, e.g. 200ms."
    ),
    slo_e2e: str | None = typer.Option(
        None, "--slo-e2e-p99", help="P99 end-to-end latency target, e.g. 60s."
    ),
    slo: list[str] = typer.Option(
        [],
        "--slo",
        help="Per-model or per-class targets: MODEL:ttft=1s,tpot=50ms or CLASS:ttft=1s.",
    ),
    min_attainment: float | None = typer.Option(
        None, "--min-attainment", help="Share of requests that must meet every target (0.99)."
    ),
    provider: list[str] = typer.Option([], "--provider", help="Allowed clouds: aws,gcp,azure."),
    region: list[str] = typer.Option([], "--region", help="Allowed regions."),
    gpu: list[str] = typer.Option([], "--gpu", help="Allowed GPU types (e.g. L4,H100)."),
    instance_type: list[str] = typer.Option([], "--instance-type", help="Allowed instances."),
    precision: list[str] = typer.Option(
        [], "--precision", help=f"Allowed precisions (default {','.join(RECOMMEND_PRECISIONS)})."
    ),
    max_quality_loss: float | None = typer.Option(
        None,
        "--max-quality-loss",
        help="Most accuracy points a quantized variant may lose (0: full precision only).",
    ),
    tp: list[str] = typer.Option([], "--tp", help="Tensor-parallel degrees to try (1,2,4,8)."),
    max_tp: int = typer.Option(8, "--max-tp", min=1, help="Largest tensor-parallel degree."),
    max_seqs: list[str] = typer.Option(
        [], "--max-seqs", help="Max sequences per replica to try (64,128,256)."
    ),
    chunked_prefill: str = typer.Option(
        "both", "--chunked-prefill", help="Chunked prefill: both, on or off."
    ),
    kv_cache: str | None = KV_CACHE_OPTION,
    memory_utilization: float | None = GPU_MEMORY_UTILIZATION_OPTION,
    purchase: list[str] = typer.Option(
        [],
        "--purchase",
        help="Purchase options allowed: on-demand, reserved, savings-plan, committed, "
        "commitments or single options (default: all but spot).",
    ),
    max_spot_share: float = typer.Option(
        0.0, "--max-spot-share", help="Largest share of the load above commitments on spot."
    ),
    spot_class: list[str] = typer.Option(
        [], "--spot-class", help="Request classes that tolerate interruption (default: all)."
    ),
    spot_rate: float = typer.Option(
        0.05, "--spot-interruptions-per-hour", help="Spot interruptions per instance-hour."
    ),
    budget: float | None = typer.Option(None, "--budget", help="Most $ per month."),
    min_replicas: int = typer.Option(
        1, "--min-replicas", min=0, max=MAX_MIN_REPLICAS, help="Replicas always up."
    ),
    verify_top: int = typer.Option(20, "--verify-top", min=1, help="Candidates to simulate."),
    verify_hours: int = typer.Option(
        1, "--verify-hours", min=1, help="Consecutive peak hours to simulate."
    ),
    max_attempts: int = typer.Option(
        3, "--max-attempts", min=1, help="Simulations per candidate, adding replicas each time."
    ),
    tighten_steps: int = typer.Option(
        3, "--tighten-steps", min=0, help="Tries to serve the winner's load on fewer replicas."
    ),
    tighten_margin: float = typer.Option(
        0.1,
        "--tighten-margin",
        help="A tightened fleet must also pass its peak hour at this much more load (0.1).",
    ),
    growth_check: bool = typer.Option(
        True,
        "--growth-check/--no-growth-check",
        help="Simulate the winner's peak hour at +10% to +100% load: the growth it absorbs.",
    ),
    compare_gpus: bool = typer.Option(
        True,
        "--compare-gpus/--no-compare-gpus",
        help="Also simulate the cheapest candidate of every other GPU type.",
    ),
    api: str = typer.Option(
        "allow",
        "--api",
        metavar="allow|never|only",
        help="Per-token APIs serving the model (`planner prices list --kind api`): allow (the "
        "cheaper of the API and the self-hosted fleet, with the break-even load), only, or "
        "never.",
    ),
    api_provider: str | None = typer.Option(
        None,
        "--api-provider",
        help="Compare with this provider's per-token offers only (e.g. the one used today).",
    ),
    api_overflow: bool = typer.Option(
        True,
        "--api-overflow/--no-api-overflow",
        help="Also plan the base load self-hosted with the peaks above it sent to the API "
        "(simulated with the API's latency, --api-ttft and --api-tpot).",
    ),
    api_ttft: str | None = typer.Option(
        None,
        "--api-ttft",
        metavar="SECONDS",
        help="The API's median time to first token in the overflow plan's simulation, e.g. "
        "0.5 or 500ms (default 0.5 s; `planner bench run` against the API measures it).",
    ),
    api_tpot: str | None = typer.Option(
        None,
        "--api-tpot",
        metavar="SECONDS",
        help="The API's median time per output token in the overflow plan's simulation, e.g. "
        "0.012 or 12ms (default 12 ms).",
    ),
    api_latency_from: str | None = typer.Option(
        None,
        "--api-latency-from",
        metavar="RUN",
        help="Take the API's latency (medians and spread) from a stored `planner bench run` "
        "against it (name or id), instead of --api-ttft and --api-tpot.",
    ),
    substitute: list[str] = typer.Option(
        [],
        "--substitute",
        metavar="LOGNAME=CATALOG",
        help="Serve catalog model CATALOG in place of the log's model LOGNAME (a proprietary "
        "model such as gpt-4o-mini has no self-hosted option otherwise); the API is still "
        "priced as LOGNAME, and CATALOG's quality against it is your call (repeatable).",
    ),
    disaggregation: str = typer.Option(
        "auto",
        "--disaggregation",
        metavar="auto|only|off",
        help="Prefill and decode on pools of their own: auto (searched beside aggregated "
        "replicas; pairs screened cheaper than the aggregated winner are simulated), only, or "
        "off.",
    ),
    workers: int = typer.Option(
        0, "--workers", min=0, help="Local processes (0: one per core; at most 4 per core)."
    ),
    dask: str | None = typer.Option(
        None, "--dask", help="Run the sweep on Dask: a scheduler address, or 'local'."
    ),
    engine: str = ENGINE_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
    confidence: str = typer.Option(
        "0.9",
        "--confidence",
        help="Size the fleet so the P99 targets hold at the upper end of this confidence's "
        "interval (model error held out, plus the simulator's sampling error); default 0.9; "
        "0 or none: on the point estimates. Errors from $PLANNER_ACCURACY or "
        "data/calibration/accuracy.json.",
    ),
    seed: int = typer.Option(
        0, "--seed", min=0, max=2**63 - 1, help="Random seed (same seed, same result)."
    ),
    max_requests: int = typer.Option(
        RECOMMEND_MAX_REQUESTS,
        "--max-requests",
        min=1,
        help="Refuse a demand whose simulated peak hours hold more requests than this (each "
        "simulation replays them); raise it to run a bigger load anyway.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write the whole result as JSON here."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Write an interactive chart (HTML): fleet by hour, cost vs P99."
    ),
    save: bool = typer.Option(True, "--save/--no-save", help="Store the recommendation."),
    rows: int = typer.Option(10, "--rows", min=1, help="Alternatives to print."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """The cheapest fleet that meets the P99 targets, verified by simulation, with the
    commitment plan behind it."""
    from planner.latency.engines import get_engine
    from planner.latency.predict import check_memory_utilization
    from planner.latency.uncertainty import parse_confidence
    from planner.recommend.inputs import SearchOptions
    from planner.usecases.recommend import RecommendRequest, recommend

    _check_numbers(
        load_scale,
        min_attainment,
        max_quality_loss,
        max_spot_share,
        spot_rate,
        budget,
        tighten_margin,
    )
    check_memory_utilization(memory_utilization)
    spec = get_engine(engine)
    outputs = Outputs(out, plot, rows, as_json)
    outputs.check()
    _check_runner(dask, workers)
    default_slo = _default_slo(slo_ttft, slo_tpot, slo_e2e)
    every_model = _every_model(model, dataset, demand)
    given = ConstraintOptions(
        model=model or "",
        provider=provider,
        region=region,
        gpu=gpu,
        instance_type=instance_type,
        precision=precision,
        max_quality_loss=max_quality_loss,
        tp=tp,
        max_tp=max_tp,
        max_seqs=max_seqs,
        chunked_prefill=chunked_prefill,
        kv_cache=kv_cache,
        memory_utilization=memory_utilization,
        purchase=purchase,
        max_spot_share=max_spot_share,
        spot_class=spot_class,
        spot_rate=spot_rate,
        budget=budget,
        min_replicas=min_replicas,
        scheduler=scheduler,
    )
    constraints = _constraints(given, spec.name, every_model)
    options = SearchOptions(
        verify_top=verify_top,
        verify_hours=verify_hours,
        max_attempts=max_attempts,
        compare_gpus=compare_gpus,
        growth_check=growth_check,
        tighten_steps=tighten_steps,
        tighten_margin=tighten_margin,
        seed=seed,
        workers=workers,
        dask=dask,
        engine=spec.name,
        confidence=parse_confidence(confidence),
        **_alternatives_asked(disaggregation, api, api_provider),
        **_overflow_asked(api_overflow, api_ttft, api_tpot, api_latency_from),
    )
    request = RecommendRequest(
        demand=_demand(dataset, demand, tokens_from, load_scale, start, end),
        slo=default_slo,
        class_slos=tuple(slo),
        min_attainment=min_attainment,
        constraints=constraints,
        options=options,
        max_requests=max_requests,
        save=save,
        all_models=every_model,
        model_map=tuple(model_map),
        unmapped=unmapped.strip().lower(),
        size_buckets=_size_buckets(size_buckets, every_model),
        colocate=colocate,
        substitutes=tuple(substitute),
    )
    with sessions_from(ctx) as sessions, _stop_on_sigterm(), _progress_bar(quiet) as progress:
        found = recommend(request, sessions, progress=progress)
    _emit(found, outputs)


@contextmanager
def _progress_bar(quiet: bool) -> Iterator[StageProgress]:
    """A bar per stage of the search on the terminal's stderr (none with --quiet)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        disable=quiet or not stderr.is_terminal,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield progress


def _emit(found: RecommendResult, outputs: Outputs) -> None:
    """The result printed and written; the result is never lost: every output is attempted,
    whatever failed before it."""
    from planner.recommend.engine import Recommendation, why_no_fleet

    data, out, plot = found.data, outputs.out, outputs.plot
    problems: list[str] = []
    if plot is not None:
        from planner.recommend.plot import html

        try:
            write_text_atomic(plot, html(data), "--plot")
            data["plot"] = str(plot)
        except PlannerError as exc:
            problems.append(str(exc))
    if out is not None:
        try:
            write_text_atomic(out, json.dumps(data, indent=2, default=str) + "\n", "--out")
        except PlannerError as exc:
            problems.append(str(exc))
    fleet = data.get("kind") == "fleet"
    if outputs.as_json:
        print_json(data)
    elif fleet:
        _print_fleet(data)
    else:
        assert isinstance(found.recommendation, Recommendation)
        _print(found.recommendation, data, outputs.rows)
    if found.not_stored is not None:
        kept = "printed" + (f" and written to {out}" if out is not None and not problems else "")
        raise StoreError(
            f"the recommendation was {kept} but not stored: {found.not_stored}. Rerun with "
            "--out FILE to keep it, or when the store is free"
        )
    if problems:
        stored = f" (stored as recommendation #{data['id']})" if "id" in data else ""
        raise UsageError("; ".join(problems) + stored)
    if fleet and data["winner"] is None:
        missing = [m["model"] for m in data["models"] if not m["pools"] and not m.get("api")]
        raise NoFleetError(
            "no fleet meets every model's targets: none for "
            + ", ".join(missing)
            + " (each model's search: --json, models[].single_pool and how)"
        )
    single = isinstance(found.recommendation, Recommendation)
    if single and data["winner"] is None and not data.get("api_only"):
        assert isinstance(found.recommendation, Recommendation)
        raise NoFleetError(why_no_fleet(found.recommendation.rejected))


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM stops the run like Ctrl-C: the runner's context kills its worker processes on
    the way out (exit status 143, as for a process the signal ended)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        stderr.print("planner recommend: stopped by SIGTERM; nothing was stored", markup=False)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1e3:,.0f}"


def _alternatives_asked(disaggregation: str, api: str, api_provider: str | None) -> dict[str, Any]:
    """What the search weighs beside aggregated self-hosting: ``--disaggregation``, ``--api``
    and ``--api-provider`` as SearchOptions takes them (normalised)."""
    return {
        "disaggregation": disaggregation.strip().lower(),
        "api": api.strip().lower(),
        "api_provider": api_provider.strip().lower() if api_provider else None,
    }


def _overflow_asked(
    overflow: bool, ttft: str | None, tpot: str | None, measured: str | None
) -> dict[str, Any]:
    """``--api-overflow``, ``--api-ttft``, ``--api-tpot`` and ``--api-latency-from`` as
    SearchOptions takes them (a latency left out: SearchOptions' default; a bench run's is
    read by the use case)."""
    from planner.simulate.inputs import parse_duration

    if measured is not None and (ttft is not None or tpot is not None):
        raise UsageError(
            "--api-latency-from takes the API's latency from a bench run: give it or "
            "--api-ttft/--api-tpot, not both"
        )
    asked: dict[str, Any] = {"api_overflow": overflow}
    if measured is not None:
        if not measured.strip():
            raise UsageError("--api-latency-from: expected a stored bench run's name or id")
        asked["api_latency_run"] = measured.strip()
    for option, text, most, key in (
        ("--api-ttft", ttft, 600.0, "api_ttft_s"),
        ("--api-tpot", tpot, 10.0, "api_tpot_s"),
    ):
        seconds = parse_duration(option, text, positive=True)
        if seconds is not None and seconds > most:
            raise UsageError(f"{option} {shown(text or '')}: expected at most {most:g} s")
        if seconds is not None:
            asked[key] = seconds
    return asked


def _every_model(model: str | None, dataset: str | None, demand: str | None) -> bool:
    """No --model: every model of a dataset's log (or of one forecast per model)."""
    return not (model or "").strip() and (
        dataset is not None or (demand is not None and "," in demand)
    )


def _usd(value: Any) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _print(result: Recommendation, data: dict[str, Any], rows: int) -> None:
    if data.get("api_only"):  # a proprietary model without a substitute: the API bill
        _print_api_only(data)
    else:
        _print_search(result)
        _print_substitute(data.get("substitute"))
        if result.winner is not None and result.plan is not None:
            _print_winner(result.winner, result.plan)
            _print_architecture(result.winner, result.architecture)
            _print_confidence(result.confidence)
        _print_api(result.api)
        _print_alternatives(result, rows)
        _print_rejections(result)
    if data.get("id") is not None:
        stdout.print(f"stored as recommendation #{data['id']}")


def _print_api_only(data: dict[str, Any]) -> None:
    """A proprietary model's plan: its demand and its API bill; no self-hosted search."""
    d = data["demand"]
    stdout.print(
        f"demand: {_cell(d['source'])}: {d['hours']} h, "
        f"peak {d['peak_requests_per_s']:,.2f} req/s, "
        f"mean {d['mean_requests_per_s']:,.2f} req/s; mean tokens in/out "
        f"{d['mean_input_tokens']:,.0f}/{d['mean_output_tokens']:,.0f}"
    )
    stdout.print(_cell(data["api_only"]))
    _print_api(data.get("api"))
    month = (data.get("api") or {}).get("month") or {}
    if month:
        stdout.print(
            f"  a month of this demand: {month['requests']:,.0f} requests, "
            f"{month['input_tokens'] / 1e6:,.2f} M input and "
            f"{month['output_tokens'] / 1e6:,.2f} M output tokens"
        )


def _print_substitute(substitute: dict[str, Any] | None) -> None:
    """The model served in place of the log's, and whose call its quality is."""
    if substitute:
        stdout.print(
            f"[bold]substitute[/]: {_cell(substitute['catalog_model'])} served in place of "
            f"{_cell(substitute['log_model'])} (API offers priced as "
            f"{_cell(substitute['log_model'])}); its quality against "
            f"{_cell(substitute['log_model'])} is your call"
        )


def _print_search(result: Recommendation) -> None:
    d = result.demand
    stdout.print(
        f"demand: {_cell(d['source'])}: {d['hours']} h, "
        f"peak {d['peak_requests_per_s']:,.2f} req/s, "
        f"mean {d['mean_requests_per_s']:,.2f} req/s; mean tokens in/out "
        f"{d['mean_input_tokens']:,.0f}/{d['mean_output_tokens']:,.0f}"
    )
    s = result.stats
    stdout.print(
        f"searched {s['candidates']:,} configurations: {s['screened']:,} screened, "
        f"{s['passed_screen']:,} passed, {s['verified']} simulated ({s['simulations']} runs, "
        f"{s['runner']}) in {s['wall_s']:,.1f} s"
    )


def _print_winner(w: dict[str, Any], plan: dict[str, Any]) -> None:
    chosen = plan["chosen"]
    unit = chosen["commitment_unit"].replace("_", " ")
    layout = (
        f"disaggregated: prefill TP {w['prefill_tp']}, decode TP {w['decode_tp']} with max "
        f"{w['max_seqs']} sequences"
        if w.get("architecture") == "disaggregated"
        else f"TP {w['tp']}, max {w['max_seqs']} sequences, chunked prefill "
        + ("on" if w["chunked_prefill"] else "off")
    )
    stdout.print(
        f"\n[bold]recommended:[/] {_cell(w['provider'])}/{_cell(w['region'])} "
        f"{_cell(w['instance_type'])} ({w['gpus_per_instance']} x {_cell(w['gpu'])}), "
        f"{_cell(w['model'])} {_cell(w['precision'])}, {layout}"
    )
    stdout.print(
        f"  engine {_cell(w['engine'])}: KV cache {_cell(w['kv_cache'])} "
        f"({_cell(w['kv_cache_source'])}), GPU memory utilization "
        f"{w['gpu_memory_utilization']:g}"
    )
    stdout.print(
        f"  {w['peak_instances']} instances at peak, {w['mean_instances']:.1f} on average; "
        f"simulated P99 TTFT {_ms(w['p99_ttft_s'])} ms, TPOT {_ms(w['p99_tpot_s'])} ms, "
        f"E2E {_ms(w['p99_e2e_s'])} ms"
    )
    stdout.print(
        f"  {_usd(chosen['monthly_usd'])}/month with {chosen['option']}"
        + (
            f" ({chosen['commitment_level']:,.2f} {unit})"
            if chosen["option"] != "on-demand"
            else ""
        )
        + (
            f", {chosen['spot_share']:.0%} of the load above it on spot"
            if chosen["spot_share"]
            else ""
        )
        + f"; all on-demand {_usd(plan['all_on_demand_monthly_usd'])} "
        f"(saves {plan['savings_vs_on_demand_pct']:.1f}%); "
        + (
            f"${w['usd_per_million_tokens']:,.3f} per million tokens"
            if w["usd_per_million_tokens"] is not None
            else "no tokens to price"
        )
    )
    growth = w.get("load_headroom")
    if growth is not None:
        holds = growth["holds_up_to"]
        stdout.print(
            f"  as built, the fleet holds the targets at {holds:.0%} of the peak hour's load "
            "(simulated)"
            if holds > 1
            else "  as built, the fleet has no room for more peak load: +10% misses a target"
        )
    for case in plan["sensitivity"]:
        stdout.print(
            f"  load {case['load']}: {case['peak_instances']} instances at peak, "
            f"{_usd(case['monthly_usd_with_this_plan'])}/month with this plan, "
            f"{_usd(case['monthly_usd_replanned'])} replanned ({case['replanned_option']})"
        )


def _print_architecture(w: dict[str, Any], arch: dict[str, Any] | None) -> None:
    """A disaggregated winner's roles and KV transfer; which architecture won, by how much."""
    if w.get("architecture") == "disaggregated":
        for pool in w.get("pools") or w.get("roles") or []:
            stdout.print(
                f"  {pool['role']}: {pool['replicas_peak']} x TP {pool['tp']} at peak, max "
                f"{pool['max_seqs']} sequences, {_usd(pool['monthly_usd'])}/month"
            )
        transfer = (w.get("verification") or {}).get("disaggregation") or {}
        t = transfer.get("transfer_s") or {}
        share = (transfer.get("transfer_share_of_ttft") or {}).get("p50")
        stdout.print(
            f"  KV cache over {_cell(w['kv_link'])}"
            + (" (assumed: not in the links catalog)" if w.get("kv_link_assumed") else "")
            + (
                f": transfer P99 {_ms(t.get('p99'))} ms, {share:.1%} of TTFT at the median"
                if share is not None
                else ""
            )
        )
    from planner.recommend.disagg import architecture_sentence

    sentence = architecture_sentence(arch)
    if sentence is not None:
        stdout.print(f"  {_cell(sentence)}")


def _print_api(api: dict[str, Any] | None) -> None:
    """The model's cheapest per-token API against the self-hosted fleet, and the break-even."""
    if not api or api.get("offer") is None:
        return
    offer = api["offer"]
    hosted = api["self_hosted_monthly_usd"]
    stdout.print(
        f"\n[bold]per-token API:[/] {_cell(offer['provider'])} {_cell(offer['offer'])} "
        f"{_usd(api['api_monthly_usd'])}/month for this demand"
        + (f" vs {_usd(hosted)} self-hosted" if hosted is not None else "")
        + f": [bold]{api['choice']}[/]"
        + (
            " (--api only)"
            if api["choice"] == "api" and hosted is not None and api["api_monthly_usd"] >= hosted
            else ""
        )
    )
    even = api.get("break_even") or {}
    if even.get("load_factor") is not None:
        stdout.print(
            f"  break-even at {even['load_factor']:.3g}x this load: {even['requests_per_s']:,.3g} "
            f"req/s on average, {even['tokens_per_month'] / 1e6:,.0f} M tokens/month, "
            f"{_usd(even['usd_per_month'])}/month either way; below it the API is cheaper"
        )
    elif hosted is not None:
        stdout.print("  no break-even between 1/10,000 and 10,000 times this load")
    _print_overflow(api.get("overflow"), api["choice"] == "overflow", api.get("latency"))


def _print_overflow(
    plan: dict[str, Any] | None, chosen: bool, latency: dict[str, Any] | None
) -> None:
    """The overflow plan: its base fleet and the share the API takes, or why there is none."""
    if not plan:
        return
    if plan["rejected"]:
        stdout.print(f"  no overflow plan: {_cell(plan['rejected'])}")
        _print_api_latency(latency)
        return
    check = plan["verification"] or {}
    stdout.print(
        f"  overflow plan{' (chosen)' if chosen else ''}: {plan['base_replicas']} replica(s) "
        f"on {plan['base_instances']} instance(s) all month ({_cell(plan['purchase']['option'])}"
        f", {_usd(plan['base_monthly_usd'])}/month) + the API for "
        f"{plan['api_share']:.1%} of requests ({_usd(plan['api_monthly_usd'])}/month) = "
        f"{_usd(plan['monthly_usd'])}/month; routed to the API at {plan['queue_threshold']} "
        f"requests outstanding per replica; simulated: "
        f"{(check.get('overflow') or {}).get('requests', 0):,} of {check.get('requests', 0):,} "
        f"requests overflowed, every P99 target held"
    )
    _print_api_latency(latency)


def _print_api_latency(latency: dict[str, Any] | None) -> None:
    """The API latency the overflow plan's simulation used, and where it comes from."""
    if latency:
        stdout.print(
            f"  the API's latency simulated: TTFT {_ms(latency['ttft_s'])} ms, TPOT "
            f"{latency['tpot_s'] * 1e3:,.1f} ms (medians, log-normal spread "
            f"{latency['sigma']:.2f}): {_cell(latency['source'])}"
        )


def _print_confidence(conf: dict[str, Any]) -> None:
    """Per target: the simulated P99, its upper bound, the confidence and the error group;
    then what the margin costs a month."""
    level = conf.get("level")
    if level is None:
        stdout.print("  no confidence margin (--confidence 0): sized on the point estimates")
        return
    for metric, row in conf["targets"].items():
        if row["target_s"] is None:
            continue
        group = row["error_group"] or {}
        stdout.print(
            f"  P99 {metric.upper()} {_ms(row['point_p99_s'])} ms, at most "
            f"{_ms(row['upper_s'])} ms at {level:.0%} confidence (target "
            f"{_ms(row['target_s'])} ms; model error x{row['model_factor']:.2f} from "
            f"{_cell(group.get('group'))}, {_cell(group.get('how'))})"
        )
    base = conf.get("point_estimate_fleet")
    if conf.get("margin_usd_per_month") is not None and base is not None:
        stdout.print(
            f"  the {level:.0%} margin costs {_usd(conf['margin_usd_per_month'])}/month: the "
            f"cheapest fleet meeting the targets on the point estimates costs "
            f"{_usd(base['monthly_usd'])} ({base['peak_instances']} x "
            f"{_cell(base['instance_type'])} at peak; {_cell(base['found'])})"
        )


def _print_fleet(data: dict[str, Any]) -> None:
    """A fleet of pools: the demand by model, a line per pool, each model's cost against one
    pool, and the savings plans across pools."""
    d = data["demand"]
    shares = ", ".join(f"{_cell(m['model'])} {m['share_of_requests']:.1%}" for m in data["models"])
    stdout.print(
        f"demand: {_cell(d['source'])}: {d['hours']} h, peak {d['peak_requests_per_s']:,.2f} "
        f"req/s; requests by model: {shares}"
    )
    if d.get("skipped"):
        stdout.print(f"  {_cell(d['skipped'])}")
    w = data["winner"]
    if w is not None:
        pools = w["pools"]
        single = w["single_pool_monthly_usd"]
        saving = w["saving_vs_single_pool_usd"] or 0.0
        versus = (
            f"; one pool per model: {_usd(single)}, saving {_usd(saving)} ({saving / single:.1%})"
            if single
            else ""
        )
        apis = len(w.get("api_pools") or [])
        stdout.print(
            f"[bold]recommended fleet[/]: {len(pools)} pool{'s' if len(pools) != 1 else ''}"
            + (f" and {apis} model(s) on a per-token API" if apis else "")
            + f", {_usd(w['monthly_usd'])}/month{versus}"
        )
        _print_pools(pools)
        _print_api_pools(w.get("api_pools") or [])
    print_table(
        [
            Column("model", [_text(m["model"]) for m in data["models"]]),
            Column("$/month", [_usd(m["monthly_usd"]) for m in data["models"]], justify="right"),
            Column(
                "one pool", [_usd(m["single_pool_monthly_usd"]) for m in data["models"]], 2, "right"
            ),
            Column(
                "saving", [_usd(m["saving_vs_single_pool_usd"]) for m in data["models"]], 1, "right"
            ),
            Column("how", [_text(m["how"]) for m in data["models"]], 3, wrap=True),
        ],
        title="cost per model, against its best single pool",
    )
    for plan in (w or {}).get("fleet_savings_plans", []):
        if plan["saving_usd"] > 0:
            stdout.print(
                f"one {_text(plan['option'])} across the {_text(plan['provider'])} pools: "
                f"${plan['usd_per_hour']:,.2f}/hour committed, {_usd(plan['monthly_usd'])}"
                f"/month against {_usd(plan['pools_apart_monthly_usd'])} with each pool's own plan"
            )
    if w is not None and w["fleet_plan_monthly_usd"] < w["monthly_usd"] - 0.5:
        stdout.print(
            f"[bold]the fleet with savings plans across its pools[/]: "
            f"{_usd(w['fleet_plan_monthly_usd'])}/month"
        )
    for note in data.get("notes", []):
        stdout.print(f"note: {_cell(note)}")
    if data.get("id") is not None:
        stdout.print(f"stored as recommendation #{data['id']}")


def _print_pools(pools: list[dict[str, Any]]) -> None:
    """A fleet's GPU pools: a row each (none: no table)."""
    if not pools:
        return
    print_table(
        [
            Column("pool", [_text(p["pool"]) for p in pools]),
            Column("inputs", [_tokens(p["input_tokens_ranges"]) for p in pools]),
            Column("share", [f"{p['share_of_requests']:.1%}" for p in pools], 3, "right"),
            Column("instance", [_text(f"{p['provider']} {p['instance_type']}") for p in pools]),
            Column("GPUs", [_text(f"{p['gpus_per_instance']} x {p['gpu']}") for p in pools], 5),
            Column("run", [_text(f"{p['precision']} TP{p['tp']}") for p in pools], 2),
            Column("peak", [str(p["instances_peak"]) for p in pools], 4, "right"),
            Column("buy", [_text(p["purchase"] or "-") for p in pools], 4),
            Column("$/month", [_usd(p["monthly_usd"]) for p in pools], justify="right"),
            Column(
                "TTFT/TPOT",
                [f"{_ms(p['p99_ttft_s'])}/{_ms(p['p99_tpot_s'])}" for p in pools],
                3,
            ),
        ],
        title="pools, each verified by simulation on its requests: P99 TTFT/TPOT in ms",
    )


def _print_api_pools(pools: list[dict[str, Any]]) -> None:
    """A fleet's models bought by the token: a line each."""
    for p in pools:
        stdout.print(
            f"  {_cell(p['pool'])}: per-token API, {_cell(p['provider'])} {_cell(p['offer'])}, "
            f"{p['requests_per_month']:,.0f} requests a month, {_usd(p['monthly_usd'])}/month "
            f"(prices of {_cell(p['source_date'])})"
        )


def _tokens(ranges: list[list[int | None]]) -> str:
    """Input-token ranges ([low, high) each) as 0-511, 2,048+."""
    parts = []
    for low, high in ranges:
        parts.append(f"{low:,}+" if high is None else f"{low:,}-{int(high) - 1:,}")
    return ", ".join(parts) if parts != ["0+"] else "all"


def _print_alternatives(result: Recommendation, rows: int) -> None:
    pareto = set(result.pareto)
    shown_rows = result.ranked[:rows]
    print_table(
        [
            Column("#", [str(r["id"]) for r in shown_rows], 3, "right"),
            Column(
                "instance", [_text(f"{r['provider']} {r['instance_type']}") for r in shown_rows]
            ),
            Column(
                "GPUs", [_text(f"{r['gpus_per_instance']} x {r['gpu']}") for r in shown_rows], 6
            ),
            Column(
                "model", [_text(f"{r['model']} {r['precision']} TP{r['tp']}") for r in shown_rows]
            ),
            Column(
                "seqs",
                [
                    f"{r['max_seqs']}" + (", chunked" if r["chunked_prefill"] else "")
                    for r in shown_rows
                ],
                1,
            ),
            Column(
                "$/month",
                [_usd(r["monthly_usd"]) + (" *" if r["id"] in pareto else "") for r in shown_rows],
                justify="right",
            ),
            Column("buy", [_text(r["purchase"]) for r in shown_rows], 4),
            Column(
                "TTFT/TPOT", [f"{_ms(r['p99_ttft_s'])}/{_ms(r['p99_tpot_s'])}" for r in shown_rows]
            ),
            Column(
                "margin",
                [
                    "-" if r["slo_headroom"] is None else f"{r['slo_headroom']:.0%}"
                    for r in shown_rows
                ],
                5,
                "right",
            ),
            Column("ok", ["yes" if r["verified"] else "no" for r in shown_rows], 2),
        ],
        title="alternatives, simulated: P99 TTFT/TPOT in ms (--json for all columns)",
    )
    stdout.print("* on the cost-vs-P99 Pareto front")


def _print_rejections(result: Recommendation) -> None:
    reasons = result.to_dict()["rejected_by_reason"]
    if reasons:
        stdout.print(
            "rejected: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(reasons.items()))
            + " (--json lists each with its reason)"
        )
    for row in [r for r in result.rejected if r["stage"] == "verify"][:5]:
        stdout.print(
            f"  {row['instance_type']} {row['precision']} TP{row['tp']}: {row['detail']}",
            markup=False,
        )
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False)


recommendations_app = typer.Typer(help="Stored recommendations: list, show.", no_args_is_help=True)


@recommendations_app.command("list")
@user_errors
def list_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Stored recommendations, oldest first."""
    from planner.usecases.recommendations import stored_recommendations

    with sessions_from(ctx) as sessions:
        runs = stored_recommendations(sessions)
    if as_json:
        print_json(runs)
        return
    print_table(
        [
            Column("id", [str(r["id"]) for r in runs], justify="right"),
            Column("created", [r["created_at"][:19] for r in runs]),  # never folded
            Column("demand", [_text(r["demand_source"]) for r in runs], 3),
            Column("model", [_text(r["model"]) for r in runs]),
            # a fleet's winner lists its pools: folded between them, never cut
            Column(
                "winner",
                [_text(r["winner"]) or "(none met the targets)" for r in runs],
                wrap=True,
            ),
            Column("$/month", [_usd(r["monthly_usd"]) for r in runs], justify="right"),
            Column("buy", [r["purchase"] or "-" for r in runs], 1),
        ]
    )


@recommendations_app.command("show")
@user_errors
def show_command(
    ctx: typer.Context,
    recommendation_id: int = typer.Argument(
        ..., min=1, max=2**63 - 1, help="Recommendation id (`planner recommendations list`)."
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Write its chart (HTML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
) -> None:
    """One stored recommendation."""
    from planner.usecases.recommendations import open_recommendation

    if plot is not None:
        check_output_path(plot, "--plot")
    with sessions_from(ctx) as sessions:
        stored = open_recommendation(recommendation_id, sessions)
    header, data = stored.header, stored.result
    try:
        _show(header, data, plot, as_json)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StoreError(
            f"recommendation #{recommendation_id} is stored in a form this planner cannot read "
            f"({type(exc).__name__}: {shown(str(exc))}); `planner recommendations show "
            f"{recommendation_id} --json` prints it as stored"
        ) from exc


def _show(header: dict[str, Any], data: Any, plot: Path | None, as_json: bool) -> None:
    if as_json:
        if plot is not None:
            _write_plot(data, plot)
        print_json({**header, "result": data})
        return
    if plot is not None:
        _write_plot(data, plot)
    stdout.print(
        f"recommendation #{header['id']} ({header['created_at'][:19]}): "
        f"{_cell(header['demand_source'])}, {_cell(header['model'])}: "
        f"{_cell(header['winner']) or 'none met the targets'}"
        + (
            f", {_usd(header['monthly_usd'])}/month ({_cell(header['purchase'])})"
            if header["winner"]
            else ""
        )
    )
    if data.get("kind") == "fleet":  # the pools, the cost per model
        _print_fleet(data)
        return
    if data.get("api_only"):
        _print_api_only(data)
        return
    _print_substitute(data.get("substitute"))
    if header["winner"] and (data.get("confidence") or {}).get("level") is not None:
        _print_confidence(data["confidence"])
    for row in data["ranked"][:10]:
        stdout.print(
            f"  #{row['id']} {row['provider']}/{row['region']}/{row['instance_type']} "
            f"{row['model']} {row['precision']} TP{row['tp']}: {_usd(row['monthly_usd'])}/month, "
            f"P99 TTFT {_ms(row['p99_ttft_s'])} ms, verified {'yes' if row['verified'] else 'no'}",
            markup=False,
        )


def _write_plot(data: Any, plot: Path) -> None:
    from planner.recommend.plot import html

    write_text_atomic(plot, html(data), "--plot")


def _text(value: Any) -> str:
    """A stored or user-given text for a table: no control characters (the table escapes
    markup)."""
    return "" if value is None else printable(str(value))


def _cell(value: Any) -> str:
    """A stored or user-given text for a line: no control characters, no markup."""
    return escape(_text(value))
