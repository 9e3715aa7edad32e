"""Simulate one what-if: ``planner simulate`` and the dashboard's What-if page both describe the
run as a :class:`SimulateRequest` and call :func:`simulate`.

The request is checked first (every number, the fleet's size against ``max_requests``, the
prices, the per-request output file), then the store is opened once, through ``sessions``, to
load the workload (a dataset replayed, or arrivals on a rate curve with a dataset's lengths)
and the calibration profiles; the simulator then runs on those values.

The What-if page also reads what a run can be built from through this module
(:func:`simulation_datasets`, :func:`demand_forecasts`, :func:`forecast_demand`,
:func:`replica_price_options`), each in one session of its ``sessions``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.common.files import check_output_path
from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.profile import Profile
from planner.latency.registry import engine_profile
from planner.latency.uncertainty import (
    DEFAULT_CONFIDENCE,
    Accuracy,
    accuracy_for,
    gpu_class,
    percentile_interval,
    summary_quantile,
)
from planner.simulate.fleet import FleetConfig
from planner.simulate.inputs import (
    InstancePrices,
    WhatIf,
    build_fleet,
    check_fleet,
    check_rate_limit_classes,
    check_whatif,
    class_slos,
    fleet_size,
    replica_prices,
)
from planner.simulate.metrics import SLO, RequestWriter
from planner.simulate.run import ServingSpec, SimulationResult
from planner.simulate.run import simulate as simulate_workload
from planner.simulate.workload import Workload, limit_prompts
from planner.store.calibrations import known_profiles
from planner.usecases import SessionScope
from planner.usecases.load import StoredDemand, instance_prices, stored_demand, workload_for

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

# (requests simulated so far, requests in all)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SimulateRequest:
    """A what-if to simulate, and where to write its per-request results (``.parquet``,
    ``.csv`` or ``.jsonl``, written whole or not at all; None: not written)."""

    whatif: WhatIf
    requests_out: Path | None = None
    requests_out_option: str = "--out-requests"  # how a message names requests_out
    # each latency percentile's interval at this confidence (None: none); the held-out errors
    # from ``accuracy_file``, else $PLANNER_ACCURACY or data/calibration/accuracy.json
    confidence: float | None = DEFAULT_CONFIDENCE
    accuracy_file: Path | None = None


@dataclass(frozen=True)
class SimulateResult:
    """The simulation's result, and the time zero of its workload (UTC)."""

    simulation: SimulationResult
    start: datetime


def simulate(
    request: SimulateRequest, sessions: SessionScope, *, progress: Progress | None = None
) -> SimulateResult:
    """Check ``request``, load its workload and profile from the store ``sessions`` opens,
    and simulate it (``progress`` gets the requests done so far and the total)."""
    check_requests_out(request.requests_out, request.requests_out_option)
    accuracy = accuracy_for(request.confidence, request.accuracy_file)
    prepared = prepare_whatif(request.whatif, sessions)
    total = len(prepared.workload)
    if progress is not None:
        progress(0, total)
    result = run_whatif(
        prepared,
        requests_out=request.requests_out,
        progress=None if progress is None else (lambda done: progress(done, total)),
        confidence=request.confidence,
        accuracy=accuracy,
    )
    return SimulateResult(result, prepared.workload.start)


INTERVAL_PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99))


def add_intervals(
    result: SimulationResult, engine: str, confidence: float, accuracy: Accuracy
) -> None:
    """Give every latency percentile of ``result.summary`` (all requests, and each class) its
    ``confidence`` interval: ``summary[...][metric]["interval"][pNN]`` = low, high, upper,
    confidence, group (planner.latency.uncertainty: the held-out error of the engine and GPU
    class, and the order-statistic bounds of the percentile from the requests simulated);
    ``summary["error_bars"]`` says where the errors came from."""
    gpu = str(result.serving["gpu"])
    summary = result.summary
    for stats in (summary["all"], *summary["classes"].values()):
        finished = int(stats.get("finished") or 0)
        for metric in ("ttft", "tpot", "e2e"):
            values = stats[metric]
            if not finished or values.get("p50") is None:
                continue

            def quantile(q: float, values: dict[str, Any] = values) -> float | None:
                return summary_quantile(values, q)

            values["interval"] = {
                name: percentile_interval(
                    values[name],
                    level,
                    confidence,
                    accuracy.lookup(engine, gpu, metric, name),
                    requests=finished,
                    quantile=quantile,
                ).to_dict()
                for name, level in INTERVAL_PERCENTILES
                if values.get(name) is not None
            }
    summary["error_bars"] = {
        "confidence": confidence,
        "accuracy_file": accuracy.source,
        "accuracy_generated": accuracy.generated,
        "engine": engine,
        "gpu_class": gpu_class(gpu),
        "method": "model error: the held-out signed errors' quantiles (measured = predicted "
        "/ (1 + e)); sampling error: the percentile's order-statistic bounds from the "
        "requests simulated (read between the kept percentiles); the two combined",
    }


def check_requests_out(path: Path | None, option: str = "--out-requests") -> None:
    """The per-request output file: a path that may be written, of a format the writer has."""
    if path is None:
        return
    check_output_path(path, option)
    if path.suffix.lower() not in RequestWriter.SUFFIXES:
        raise UsageError(
            f"{option} {shown(str(path))}: unsupported output format "
            f"{shown(path.suffix or '(no suffix)')}; "
            f"supported: {', '.join(RequestWriter.SUFFIXES)}"
        )


# --- the two steps: prepare (check and load), then run on values ---------------------------------


@dataclass(frozen=True)
class PreparedRun:
    """A what-if ready to simulate: everything :func:`~planner.simulate.run.simulate` takes."""

    workload: Workload
    serving: ServingSpec
    fleet: FleetConfig
    profile: Profile
    slos: dict[str, SLO]
    prices: dict[str, float] | None
    fleet_size: int
    available_requests: int = 0  # the workload's requests before --requests kept the first
    refused: Workload | None = None  # over-long prompts an engine refuses (--over-length refuse)
    over_length: int = 0  # prompts over --max-model-len: cut or refused
    max_model_len: int | None = None
    over_length_mode: str = "truncate"


def prepare_whatif(whatif: WhatIf, sessions: SessionScope) -> PreparedRun:
    """Check ``whatif`` and build what :func:`~planner.simulate.run.simulate` takes, in the
    order ``planner simulate`` always has: the settings, the fleet and its size against
    ``max_requests``, the prices, then (in the store ``sessions`` opens) the workload and the
    calibration profiles, the workload's size, and the per-class targets and rate limits."""
    kv_asked, spec = check_whatif(whatif)
    serving = replace(whatif.serving, kv_cache=kv_asked, engine=spec.name)
    fleet = build_fleet(whatif.fleet, serving.tp, whatif.seed)
    size = fleet_size(fleet)
    check_fleet(size, whatif.max_requests)  # a fleet too big fails before any request is read
    prices = replica_prices(fleet, whatif.prices, whatif.price_names)
    with _store(sessions)() as session:
        workload = workload_for(
            session, whatif.demand, seed=whatif.seed, max_requests=whatif.max_requests
        )
        profiles = known_profiles(session)
    profile = engine_profile(profiles, serving.deployment().gpu.name, spec, whatif.profile)
    available = len(workload)
    if whatif.requests is not None:
        workload = workload.head(whatif.requests)
    limited = limit_prompts(workload, whatif.max_model_len, whatif.over_length)
    if not len(limited.kept):
        raise UsageError(
            f"every one of the {len(workload):,} requests has a prompt longer than "
            f"--max-model-len {whatif.max_model_len:,} and --over-length refuse refuses them all; "
            "raise --max-model-len or use --over-length truncate"
        )
    slos = class_slos(workload.classes, whatif.class_slos, whatif.slo)
    check_rate_limit_classes(fleet.rate_limits, workload.classes)
    return PreparedRun(
        limited.kept,
        serving,
        fleet,
        profile,
        slos,
        prices,
        size,
        available_requests=available,
        refused=limited.refused,
        over_length=limited.affected,
        max_model_len=whatif.max_model_len,
        over_length_mode=whatif.over_length,
    )


def run_whatif(
    prepared: PreparedRun,
    *,
    requests_out: Path | None = None,
    progress: Callable[[int], None] | None = None,
    confidence: float | None = DEFAULT_CONFIDENCE,
    accuracy: Accuracy | None = None,
) -> SimulationResult:
    """Simulate a prepared what-if (``progress`` gets the requests done so far); its latency
    percentiles get their ``confidence`` intervals (:func:`add_intervals`; ``accuracy``:
    the held-out errors, by default :func:`~planner.latency.uncertainty.bundled_accuracy`;
    no confidence: none)."""
    result = simulate_workload(
        prepared.workload,
        prepared.serving,
        prepared.fleet,
        prepared.profile,
        slos=prepared.slos,
        price_per_replica_hour=prepared.prices,
        requests_out=requests_out,
        progress=progress,
        refused=prepared.refused,
    )
    result.available_requests = max(prepared.available_requests, result.requests)
    if prepared.max_model_len is not None:
        result.prompt_limit = {
            "max_model_len": prepared.max_model_len,
            "over_length": prepared.over_length_mode,
            "affected": prepared.over_length,
        }
        cut = "cut to" if prepared.over_length_mode == "truncate" else "refused over"
        result.notes.append(
            f"{prepared.over_length:,} of {result.requests:,} requests had prompts longer "
            f"than --max-model-len {prepared.max_model_len:,} tokens and were {cut} it"
        )
    if confidence is not None:
        errors = accuracy if accuracy is not None else accuracy_for(confidence)
        add_intervals(result, prepared.serving.engine, confidence, errors)
    return result


# --- what a what-if can be built from (the dashboard's choices) -----------------------------------


def simulation_datasets(sessions: SessionScope) -> dict[str, int]:
    """The stored datasets a what-if can replay or draw lengths from: name -> requests, oldest
    first."""
    from planner.store.summaries import dataset_records

    with _store(sessions)() as session:
        return {r["name"]: int(r["rows"]) for r in dataset_records(session)}


def demand_forecasts(sessions: SessionScope) -> dict[int, str]:
    """The stored forecasts with a demand curve: id -> label."""
    from planner.store.forecasts import list_forecasts

    with _store(sessions)() as session:
        return {
            run.id: f"#{run.id}: {run.source} ({run.horizon_hours} h, q{run.demand_quantile:g})"
            for run in list_forecasts(session)
            if run.demand_quantile is not None
        }


def forecast_demand(forecast_id: int, sessions: SessionScope) -> StoredDemand:
    """The demand curve stored with forecast ``forecast_id``."""
    with _store(sessions)() as session:
        return stored_demand(session, forecast_id)


def replica_price_options(gpu: str, tp: int, sessions: SessionScope) -> list[InstancePrices]:
    """The latest price sheet's instance types with ``gpu`` holding whole replicas of ``tp``
    GPUs, priced per replica-hour, cheapest per GPU first."""
    with _store(sessions)() as session:
        return instance_prices(session, gpu, tp)


def _store(sessions: SessionScope) -> Callable[[], AbstractContextManager[Session]]:
    """``sessions``, refusing a scope with no store open."""

    @contextmanager
    def opened() -> Iterator[Session]:
        with sessions() as session:
            if session is None:
                raise UsageError("a what-if reads its requests from a store; none is open")
            yield session

    return opened
