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

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.access import Action, require
from planner.common.files import check_output_path
from planner.common.text import printable, shown
from planner.errors import UsageError
from planner.latency.profile import Profile
from planner.latency.registry import engine_profile
from planner.latency.uncertainty import (
    DEFAULT_CONFIDENCE,
    Accuracy,
    accuracy_for,
    gpu_class,
    stats_intervals,
)
from planner.simulate.closed_loop import MAX_CLIENTS, START_MODES
from planner.simulate.closed_loop import MAX_REQUESTS as MAX_LOOP_REQUESTS
from planner.simulate.fleet import FleetConfig, FleetStats
from planner.simulate.inputs import (
    ApiOverflow,
    DemandSource,
    InstancePrices,
    WhatIf,
    build_fleet,
    check_closed_loop,
    check_fleet,
    check_rate_limit_classes,
    check_whatif,
    class_slos,
    fleet_size,
    replica_prices,
)
from planner.simulate.metrics import SLO, RequestChunk, RequestWriter, Timeline
from planner.simulate.run import ServingSpec, SimulationResult, serving_summary
from planner.simulate.run import simulate as simulate_workload
from planner.simulate.workload import Workload, limit_prompts
from planner.store.calibrations import known_profiles
from planner.usecases import SessionScope
from planner.usecases.load import (
    ModelPick,
    StoredDemand,
    instance_prices,
    pick_models,
    stored_demand,
    workload_for,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from planner.simulate.closed_loop import ClosedLoopRun
    from pricing.api import TokenPrice

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
    # a closed loop of clients instead of the workload's arrival times (None: open loop)
    clients: ClientLoad | None = None


@dataclass(frozen=True)
class ClientLoad:
    """``--clients``: ``clients`` clients, each sending its next request ``think_s`` after its
    last one finished, started ``start`` (synchronized: together; staggered: spread over one
    request's unloaded time; waves: together, and each wave resent together once all of it is
    back, GenAI-Perf's and AIPerf's lock-step). The requests take the workload's lengths in
    order, cycled; the run sends ``--requests`` of them (default: as many as the workload
    holds)."""

    clients: int
    think_s: float = 0.0
    start: str = "synchronized"

    def describe(self) -> str:
        return (
            f"closed loop: {self.clients:,} client{'' if self.clients == 1 else 's'}, "
            f"{self.start}, think {self.think_s:g} s"
        )


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
    require(Action.WHATIF)
    if request.clients is not None:
        return simulate_clients(request, request.clients, sessions, progress=progress)
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
    result.load_model = open_load_model(request.whatif.demand, prepared.models)
    return SimulateResult(result, prepared.workload.start)


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
            values["interval"] = stats_intervals(
                values, metric, finished, confidence, accuracy, engine, gpu
            )
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
    # a dataset that logs several models: the requests of the served model taken from it
    models: ModelPick | None = None
    # prefill and decode apart: the roles, the decode pool's fleet and profile, prices by role
    disaggregated: DisaggregatedRun | None = None
    # the API behind the fleet (--api-overflow-queue) and the price of its tokens (None: none)
    api: ApiOverflow | None = None
    api_price: TokenPrice | None = None


@dataclass(frozen=True)
class DisaggregatedRun:
    """What :func:`~planner.simulate.disagg.simulate_disaggregated` takes besides the
    workload: ``PreparedRun.fleet`` and ``profile`` are the prefill pool's."""

    spec: Any  # planner.simulate.disagg.DisaggregatedSpec
    decode_fleet: FleetConfig
    decode_profile: Profile
    prices: dict[str, dict[str, float]] | None


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
        models = pick_models(session, whatif.demand, serving.model)
        workload = workload_for(
            session,
            whatif.demand,
            seed=whatif.seed,
            max_requests=whatif.max_requests,
            log_models=None if models is None else models.log_models,
        )
        profiles = known_profiles(session)
        api_price = _api_price(session, whatif.fleet.api, serving.model)
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
    disaggregated = None
    if whatif.disaggregation is not None:
        disaggregated = _disaggregated(whatif, serving, profiles, spec, prices)
        fleet = replace(
            fleet,
            replicas={"on-demand": whatif.disaggregation.prefill_replicas},
            gpus_per_replica=disaggregated.spec.prefill.tp,
        )
        serving = disaggregated.spec.prefill
        profile = engine_profile(profiles, serving.deployment().gpu.name, spec, whatif.profile)
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
        models=models,
        disaggregated=disaggregated,
        api=whatif.fleet.api,
        api_price=api_price,
    )


def _disaggregated(
    whatif: WhatIf,
    serving: ServingSpec,
    profiles: Any,
    engine: Any,
    prices: dict[str, float] | None,
) -> DisaggregatedRun:
    """The roles of a disaggregated what-if: each the what-if's serving with its own GPU and
    TP, the link (by default the GPU's NVLink when both roles fit one node), the decode pool,
    and each role's replica prices (the given price per replica is per ``--tp`` GPUs)."""
    from planner.latency.catalog import load_catalog
    from planner.latency.disagg import default_link
    from planner.simulate.disagg import DisaggregatedSpec

    d = whatif.disaggregation
    assert d is not None
    settings = whatif.fleet
    if settings.autoscale or settings.schedule is not None:
        raise UsageError(
            "--autoscale and --schedule size an aggregated fleet; a disaggregated run takes "
            "fixed --prefill-replicas and --decode-replicas"
        )
    prefill = replace(serving, gpu=d.prefill_gpu or serving.gpu, tp=d.prefill_tp or serving.tp)
    decode = replace(serving, gpu=d.decode_gpu or serving.gpu, tp=d.decode_tp or serving.tp)
    link = d.kv_link
    if link is None:
        gpus = load_catalog().gpus
        p_gpu, d_gpu = gpus.get(prefill.gpu), gpus.get(decode.gpu)
        used = d.prefill_replicas * prefill.tp + d.decode_replicas * decode.tp
        # two GPU types never share a node: no NVLink between them
        most = p_gpu.max_gpus_per_node if p_gpu.name == d_gpu.name else 0
        link = default_link(p_gpu.name, used, most).name
    spec = DisaggregatedSpec(prefill, decode, link, d.first_token)
    spec.resolved_link()  # an unknown link is an error now, before any simulation
    decode_fleet = FleetConfig(
        replicas={"on-demand": d.decode_replicas},
        router=settings.router,
        gpus_per_replica=decode.tp,
        seed=whatif.seed,
    )
    decode_profile = engine_profile(profiles, decode.deployment().gpu.name, engine, whatif.profile)
    role_prices = None
    if prices is not None:
        role_prices = {
            role: {k: v / serving.tp * s.tp for k, v in prices.items()}
            for role, s in (("prefill", prefill), ("decode", decode))
        }
    return DisaggregatedRun(spec, decode_fleet, decode_profile, role_prices)


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
    if prepared.disaggregated is not None:
        from planner.simulate.disagg import simulate_disaggregated

        run = prepared.disaggregated
        result = simulate_disaggregated(
            prepared.workload,
            run.spec,
            prepared.fleet,
            run.decode_fleet,
            prepared.profile,
            run.decode_profile,
            slos=prepared.slos,
            price_per_replica_hour=run.prices,
            progress=progress,
            requests_out=requests_out,
        )
    else:
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
    _note_models(prepared, result)
    _note_prompt_limit(prepared, result)
    _note_api(prepared, result)
    if confidence is not None:
        errors = accuracy if accuracy is not None else accuracy_for(confidence)
        add_intervals(result, prepared.serving.engine, confidence, errors)
    return result


# --- what a what-if can be built from (the dashboard's choices) -----------------------------------


def _note_models(prepared: PreparedRun, result: SimulationResult) -> None:
    """A dataset of several models: which log names the run took (``summary["log_models"]``,
    in ``--json`` too) and the share left out, in its notes."""
    models = prepared.models
    if models is None or (models.log_models is None and not models.resolution.skipped):
        return  # every request of the log is the model's: nothing was picked or left out
    result.summary["log_models"] = models.to_dict()
    result.notes.extend(models.notes())


def _note_prompt_limit(prepared: PreparedRun, result: SimulationResult) -> None:
    """``--max-model-len``'s limit and what it did, in the result and its notes."""
    if prepared.max_model_len is None:
        return
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


def _api_price(session: Session, api: ApiOverflow | None, model: str) -> TokenPrice | None:
    """The API price in force that ``--api-price`` names (PROVIDER/OFFER), or
    ``--api-provider``'s best offer for ``model``; None when neither is given."""
    if api is None or (api.price is None and api.provider is None):
        return None
    from pricing.api import api_prices_for
    from pricing.api_sheets import api_entries, ensure_api_prices

    ensure_api_prices(session)
    prices = [entry.price for entry in api_entries(session)]
    if api.price is not None:
        provider, _, offer = api.price.strip().partition("/")
        wanted = (provider.strip().lower(), offer.strip().lower())
        found = [p for p in prices if (p.provider.lower(), p.offer.lower()) == wanted]
        if not found:
            raise UsageError(
                f"--api-price {shown(api.price)}: no API price in force for that offer; "
                "`planner prices list --kind api` lists them as PROVIDER and OFFER"
            )
        return found[0]
    assert api.provider is not None
    found = api_prices_for(model, prices, provider=api.provider)
    if not found:
        providers = sorted({p.provider for p in api_prices_for(model, prices)})
        raise UsageError(
            f"--api-provider {shown(api.provider)}: no API price in force for "
            f"{printable(model)} from that provider; "
            + (
                f"those with one: {', '.join(providers)}"
                if providers
                else "no provider has one (`planner prices list --kind api` lists the offers)"
            )
        )
    return found[0]


def _note_api(prepared: PreparedRun, result: SimulationResult) -> None:
    """The API behind the fleet: what it took (requests, tokens, its share), what its rate
    limit sent back, and its cost beside the fleet's, in ``summary["api"]`` and the notes."""
    api = prepared.api
    if api is None:
        return
    stats = result.fleet
    requests = max(result.requests, 1)
    workload = prepared.workload
    tokens = int(workload.input_tokens.sum()) + int(workload.output_tokens.sum())
    api_tokens = stats.overflow_input_tokens + stats.overflow_output_tokens
    price = prepared.api_price
    api_usd = None
    if price is not None:
        from pricing.api import cost_usd

        api_usd = cost_usd(price, stats.overflow_input_tokens, stats.overflow_output_tokens)
    fleet_usd = result.cost["total"] if result.cost is not None else None
    result.summary["api"] = {
        "queue": api.queue,
        "ttft_s": api.ttft_s,
        "tpot_s": api.tpot_s,
        "sigma": api.sigma,
        "rpm": api.rpm,
        "tpm": api.tpm,
        "requests": stats.overflowed,
        "input_tokens": stats.overflow_input_tokens,
        "output_tokens": stats.overflow_output_tokens,
        "rate_limited": stats.overflow_rate_limited,
        "share": stats.overflowed / requests,
        "token_share": api_tokens / tokens if tokens else 0.0,
        "price": price.to_dict() if price is not None else None,
        "cost_usd": api_usd,
        "fleet_cost_usd": fleet_usd,
        "total_usd": (
            api_usd + fleet_usd if api_usd is not None and fleet_usd is not None else None
        ),
    }
    result.notes.append(
        f"the latency percentiles include the {stats.overflowed:,} requests the API behind the "
        "fleet served (replica -2 in --out-requests)"
    )
    if price is not None and api.rpm is None and api.tpm is None and (price.rpm or price.tpm):
        result.notes.append(
            f"{price.provider} {price.offer} publishes a rate limit ({price.rpm or '-'} requests, "
            f"{price.tpm or '-'} tokens a minute) the run did not apply: give --api-rpm and "
            "--api-tpm to simulate it"
        )
    served = str(result.serving.get("model") or prepared.serving.model)
    if price is not None and price.catalog_model not in (None, served):
        result.notes.append(
            f"the API price is {price.provider} {price.offer}'s, an offer of "
            f"{printable(price.catalog_model or '')}, not of {printable(served)}"
        )


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


def api_price_offers(model: str, sessions: SessionScope) -> list[str]:
    """The per-token API offers in force for ``model`` (a catalog name or alias), as
    ``PROVIDER/OFFER`` (what ``--api-price`` takes), best match first."""
    from pricing.api import api_prices_for
    from pricing.api_sheets import api_entries, ensure_api_prices

    with _store(sessions)() as session:
        ensure_api_prices(session)
        prices = [entry.price for entry in api_entries(session)]
    return [f"{p.provider}/{p.offer}" for p in api_prices_for(model, prices)]


def _store(sessions: SessionScope) -> Callable[[], AbstractContextManager[Session]]:
    """``sessions``, refusing a scope with no store open."""

    @contextmanager
    def opened() -> Iterator[Session]:
        with sessions() as session:
            if session is None:
                raise UsageError("a what-if reads its requests from a store; none is open")
            yield session

    return opened


# --- load models: open-loop arrivals in words, and a closed loop of clients ---------------------


def open_load_model(demand: DemandSource, models: ModelPick | None = None) -> str:
    """How an open-loop what-if's requests arrive, in words (``models``: the one model's
    requests taken from a dataset of several)."""
    only = ""
    if models is not None and models.log_models is not None:
        only = f" ({printable(models.model)}'s requests only)"
    if demand.dataset is not None:
        scale = "" if demand.load_scale == 1.0 else f" at {demand.load_scale:g}x its load"
        return (
            f"open loop: dataset {printable(demand.dataset)}{only} replayed{scale}, "
            "its own arrivals"
        )
    if isinstance(demand.rates, Path):
        curve = demand.rates_label or str(demand.rates)
    else:
        curve = demand.rates_label or "given"
    if demand.constant_rate:
        process = "constant-rate arrivals (evenly spaced)"
    elif demand.cv == 1.0:
        process = "Poisson arrivals"
    else:
        kind = "bursty" if demand.cv > 1 else "smoother than Poisson"
        process = f"gamma arrivals ({kind}, inter-arrival CV {demand.cv:g})"
    lengths = f", lengths from dataset {printable(demand.tokens_from or '')}{only}" if only else ""
    return f"open loop: {process} on the rate curve {printable(curve)}{lengths}"


def check_client_load(load: ClientLoad) -> None:
    """The closed loop's numbers, named by their options."""
    if not 1 <= load.clients <= MAX_CLIENTS:
        raise UsageError(f"--clients {load.clients}: expected 1 to {MAX_CLIENTS:,} clients")
    if not (math.isfinite(load.think_s) and load.think_s >= 0):
        raise UsageError(f"--think-time {load.think_s:g}: expected a duration of 0 s or more")
    if load.start not in START_MODES:
        raise UsageError(f"--client-start {shown(load.start)}: expected {', '.join(START_MODES)}")


def simulate_clients(
    request: SimulateRequest,
    load: ClientLoad,
    sessions: SessionScope,
    *,
    progress: Progress | None = None,
) -> SimulateResult:
    """A what-if under a closed loop of ``load``'s clients on its fixed fleet: the workload
    gives the request lengths (in order, cycled) and the number of requests (``--requests``,
    else all of them); the result has the open loop's summary, intervals and outputs."""
    check_client_load(load)
    whatif = request.whatif
    check_closed_loop(whatif)
    check_requests_out(request.requests_out, request.requests_out_option)
    accuracy = accuracy_for(request.confidence, request.accuracy_file)
    prepared = prepare_whatif(whatif, sessions)
    total = whatif.requests if whatif.requests is not None else len(prepared.workload)
    limit = min(whatif.max_requests, MAX_LOOP_REQUESTS)
    if total > limit:
        raise UsageError(
            f"--requests {total:,}: over the limit of {limit:,} requests a closed loop may "
            "send (--max-requests)"
        )
    if progress is not None:
        progress(0, total)
    result = run_clients(prepared, load, total, requests_out=request.requests_out)
    if progress is not None:
        progress(total, total)
    if request.confidence is not None:
        add_intervals(result, prepared.serving.engine, request.confidence, accuracy)
    return SimulateResult(result, prepared.workload.start)


def run_clients(
    prepared: PreparedRun, load: ClientLoad, total: int, *, requests_out: Path | None = None
) -> SimulationResult:
    """``total`` requests of a closed loop of ``load``'s clients through ``prepared``'s fixed
    fleet (:func:`planner.simulate.closed_loop.run_closed_loop`: a least-outstanding router),
    summarised as :func:`~planner.simulate.run.simulate` summarises an open loop."""
    import numpy as np

    from planner.latency.model import LatencyModel
    from planner.simulate.closed_loop import ClosedLoop, run_closed_loop
    from planner.simulate.engine import RooflineStepTimes
    from planner.simulate.metrics import MetricsCollector, cost

    workload, serving = prepared.workload, prepared.serving
    deployment = serving.deployment()
    engine = serving.engine_config(deployment)
    times = RooflineStepTimes(LatencyModel(deployment, prepared.profile), deployment.max_seqs)
    purchase = prepared.fleet.replicas
    replicas = sum(purchase.values())
    stagger = 0.0
    if load.start == "staggered":  # spread over one mean request's unloaded time
        mean_in = np.array([max(1, round(float(workload.input_tokens.mean())))])
        mean_out = np.array([max(1, round(float(workload.output_tokens.mean())))])
        alone = run_closed_loop(times, engine, ClosedLoop(1, 1), mean_in, mean_out)
        unloaded = float(alone.finish[0] - alone.arrival[0])
        stagger = unloaded if math.isfinite(unloaded) else 0.0
    loop = ClosedLoop(load.clients, total, load.think_s, load.start, stagger)
    began = time.perf_counter()
    run = run_closed_loop(
        times, engine, loop, workload.input_tokens, workload.output_tokens, replicas=replicas
    )
    wall = time.perf_counter() - began
    chunk = _client_chunk(run, workload, replicas)
    collector = MetricsCollector(workload.classes, prepared.slos)
    collector.add(chunk)
    if requests_out is not None:
        with RequestWriter(requests_out, workload.classes) as writer:
            writer.write(chunk)
    served = np.isfinite(run.finish)
    end = float(max(run.arrival.max(), run.finish[served].max() if served.any() else 0.0))
    timeline = _client_timeline(run, replicas, purchase, end)
    refused = int((~served).sum())
    stats = FleetStats(
        launched=replicas,
        peak_replicas=replicas,
        rejected_too_long=refused,
        gpu_hours=timeline.gpu_hours(deployment.tp),
    )
    fleet_cost = None
    if prepared.prices is not None:
        per_gpu = {name: price / deployment.tp for name, price in prepared.prices.items()}
        fleet_cost = cost(stats.gpu_hours, per_gpu)
    result = SimulationResult(
        summary=collector.summary(),
        fleet=stats,
        cost=fleet_cost,
        fleet_timeline=timeline,
        serving=serving_summary(serving, deployment, engine, prepared.profile, "least-requests"),
        requests=total,
        simulated_s=end,
        wall_s=wall,
        requests_out=str(requests_out) if requests_out is not None else None,
        notes=_client_notes(prepared, load, total, refused, engine.kv_capacity_tokens, stagger),
        available_requests=prepared.available_requests,
        load_model=load.describe(),
    )
    _note_models(prepared, result)
    _note_prompt_limit(prepared, result)
    return result


def _client_chunk(run: ClosedLoopRun, workload: Workload, replicas: int) -> RequestChunk:
    """A closed loop's requests as the metrics and the request writer take them (request k
    has the workload's request k mod n's class; the replica is not recorded by the closed
    loop: 0 on a one-replica fleet, else -1)."""
    import numpy as np

    n = len(run.arrival)
    served = np.isfinite(run.finish)
    replica = np.full(n, 0 if replicas == 1 else -1)
    replica[~served] = -1
    return RequestChunk(
        request_id=np.arange(n),
        arrival_s=run.arrival,
        first_token_s=np.where(served, run.first_token, np.nan),
        finish_s=run.finish,
        replica=replica,
        class_index=workload.class_index[np.arange(n) % len(workload)],
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cached_tokens=np.zeros(n, dtype=np.int64),
        preemptions=run.preemptions.astype(np.int32),
        rejected=~served,
        response_cache_hit=np.zeros(n, dtype=np.bool_),
    )


def _client_timeline(
    run: ClosedLoopRun, replicas: int, purchase: dict[str, int], end: float
) -> Timeline:
    """The fleet's state over a closed-loop run: requests waiting for their first token
    (queued), decoding (running), and busy replicas taken as min(replicas, requests inside)
    (the closed loop does not record each replica's)."""
    import numpy as np

    served = np.isfinite(run.finish)
    count = int(served.sum())
    times = np.concatenate([run.arrival[served], run.first_token[served], run.finish[served]])
    queued = np.concatenate([np.ones(count), -np.ones(count), np.zeros(count)])
    running = np.concatenate([np.zeros(count), np.ones(count), -np.ones(count)])
    order = np.argsort(times, kind="stable")
    times = times[order]
    queued = np.cumsum(queued[order])
    running = np.cumsum(running[order])
    last = np.flatnonzero(np.append(np.diff(times) > 0, True))  # the state after each instant
    timeline = Timeline()
    timeline.record(0.0, replicas, 0, 0, 0, purchase)
    for t, waiting, decoding in zip(
        times[last].tolist(), queued[last].tolist(), running[last].tolist(), strict=True
    ):
        inside = int(waiting + decoding)
        timeline.record(t, replicas, min(replicas, inside), int(waiting), int(decoding), purchase)
    timeline.advance_to(max(end, timeline.end_s or 0.0))
    return timeline


def _client_notes(
    prepared: PreparedRun,
    load: ClientLoad,
    total: int,
    refused: int,
    kv_capacity: int,
    stagger_s: float,
) -> list[str]:
    notes = []
    lengths = len(prepared.workload)
    if total > lengths:
        notes.append(
            f"the workload has {lengths:,} requests: their lengths were sent in order and "
            f"cycled to make the {total:,} requests"
        )
    if load.start == "staggered":
        notes.append(
            f"the clients started spread over {stagger_s:,.3f} s, one mean request's time "
            "alone on a replica"
        )
    if prepared.workload.prefix_blocks is not None:
        notes.append(
            "the dataset's prefix-cache block ids are not replayed by the closed loop "
            "(--prefix-hit-rate sets a cached share instead)"
        )
    if refused:
        notes.append(
            f"{refused:,} requests are longer than the whole KV cache ({kv_capacity:,} tokens) "
            "and were refused; their clients sent the next request at once"
        )
    if prepared.refused is not None and len(prepared.refused):
        notes.append(
            f"{len(prepared.refused):,} requests over --max-model-len were left out of the "
            "lengths the clients send"
        )
    return notes
