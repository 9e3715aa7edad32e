"""Recommend: the cheapest fleet that meets the P99 targets, verified by simulation, with the
commitment plan behind it; ``planner recommend`` and the dashboard's Recommendations page (its
background search, :mod:`planner.usecases.recommend_background`) both call :func:`recommend`.

It checks the request, then loads everything the search reads from the store (the demand: an
ingested dataset's requests, a stored forecast's demand curve, or a demand-curve CSV, with the
request lengths drawn from a dataset; the prices, the bundled list prices loaded on first use;
the calibration profiles), runs the pure search (:func:`planner.recommend.engine.recommend`)
on those values, and stores the result, which is never lost to a failed save.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from planner.access import Action, require
from planner.common.text import closest, printable, shown
from planner.errors import PlannerError, StoreError, UsageError
from planner.latency.profile import Profile, choose_profile
from planner.latency.uncertainty import accuracy_for
from planner.recommend import engine
from planner.recommend.engine import dollars
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.limits import (
    DEFAULT_MAX_REQUESTS,
    LimitNames,
    WindowLimit,
    check_load_scale,
)
from planner.recommend.mix import (
    FleetRecommendation,
    FleetRequest,
    ModelDemand,
    common_hours,
    recommend_fleet,
)
from planner.recommend.proprietary import (
    ApiModelOf,
    PlannedModel,
    PlannedRecommendation,
    api_model_of,
    api_only,
    no_self_hosted_note,
    planned_model,
    quality_note,
)
from planner.recommend.sweep import StageProgress
from planner.simulate.inputs import class_slos
from planner.simulate.metrics import SLO
from planner.simulate.workload import EPOCH, Workload
from planner.store.calibrations import known_profiles
from planner.store.models import Request as RequestRow
from planner.store.queries import get_dataset
from planner.store.recommendations import save_recommendation
from planner.usecases import SessionScope
from planner.usecases.audit import record
from planner.usecases.load import dataset_models, from_dataset, stored_demand, token_pool
from planner.workload.model_names import (
    UNMAPPED_CHOICES,
    ModelResolution,
    catalog_model_of,
    parse_model_map,
    resolve_models,
    shown_name,
    substituted_names,
)
from planner.workload.rates import HOUR_S, RateCurve, read_rate_curve
from pricing.api import api_prices_for
from pricing.model import PricePoint
from pricing.sheets import check_filters, ensure_list_prices, latest_prices

SAVE_ATTEMPTS = 3  # a store busy with another writer: tries, a second apart
Window = tuple[datetime | None, datetime | None]


@dataclass(frozen=True)
class DemandChoice:
    """Which demand to plan for: exactly one of an ingested ``dataset`` (replayed, optionally
    only its requests in ``window``), a stored forecast (``forecast_id``) or a demand-curve
    ``csv``; the latter two draw request lengths from dataset ``tokens_from`` (a forecast
    defaults to the dataset it was fitted on). Every hour's load is multiplied by
    ``load_scale``."""

    dataset: str | None = None
    forecast_id: int | None = None
    csv: Path | str | None = None
    tokens_from: str | None = None
    load_scale: float = 1.0
    window: Window = (None, None)
    # several stored forecasts, one per model of a log: a fleet of their models
    forecast_ids: tuple[int, ...] = ()

    def describe(self) -> str:
        if len(self.forecast_ids) > 1:
            source = "forecasts " + ", ".join(f"#{i}" for i in self.forecast_ids)
        elif self.forecast_id is not None:
            source = f"forecast #{self.forecast_id}"
        elif self.csv is not None:
            source = f"file {printable(str(self.csv), 200)}"
        else:
            source = f"dataset {self.dataset}"
        return source + (f" x {self.load_scale:g}" if self.load_scale != 1 else "")


@dataclass(frozen=True)
class RecommendRequest:
    """Everything a recommendation needs from its user: the demand, the P99 targets (``slo``
    for every request class, overridden per class by ``class_slos``: the CLI's
    ``--slo CLASS:ttft=1s,tpot=50ms``), the constraints and the search effort; ``names`` says
    how a refusal names the inputs (the CLI's options by default); ``save``: store the
    result."""

    demand: DemandChoice
    slo: SLO
    constraints: Constraints
    options: SearchOptions
    class_slos: tuple[str, ...] = ()
    min_attainment: float | None = None
    max_requests: int = DEFAULT_MAX_REQUESTS
    names: LimitNames = field(default_factory=LimitNames)
    save: bool = True
    # the held-out errors the confidence margin comes from (None: $PLANNER_ACCURACY, else the
    # bundled data/calibration/accuracy.json, else the stated default error)
    accuracy_file: Path | None = None
    # a log of several models: every model it holds (no --model), how its names map to catalog
    # models (--model-map LOGNAME=CATALOG) and what to do with names that map to none
    all_models: bool = False
    model_map: tuple[str, ...] = ()
    unmapped: str = "error"
    # input-token boundaries splitting each model's requests across GPU types (the fleet
    # search); None: one pool per model (several models) or the single-pool search (one)
    size_buckets: tuple[int, ...] | None = None
    colocate: bool = True  # a fleet may put small, quiet models on one instance together
    # --substitute LOGNAME=CATALOG: a log's model (a proprietary one, typically) served as a
    # catalog model, its API offers still looked up by LOGNAME
    substitutes: tuple[str, ...] = ()

    def check(self) -> None:
        """What can be refused before any work: no target, a bad load scale."""
        if not self.class_slos:
            Targets({"default": self.slo}, self.min_attainment)
        check_load_scale(self.demand.load_scale, self.names.load_scale)
        if self.all_models and self.demand.dataset is None and len(self.demand.forecast_ids) < 2:
            raise UsageError(
                "--model: name the model to serve; only a dataset's log (or one forecast per "
                "model of it) names its models"
            )
        if self.unmapped not in UNMAPPED_CHOICES:
            raise UsageError(
                f"--unmapped {shown(self.unmapped)}: expected {' or '.join(UNMAPPED_CHOICES)}"
            )
        mapped = parse_model_map(self.model_map)
        substituted = parse_model_map(self.substitutes, "--substitute")
        both = [n for n in substituted if n.strip().lower() in {m.lower() for m in mapped}]
        if both:
            raise UsageError(
                f"{shown(both[0])} is given to --model-map and to --substitute: give it once "
                "(--substitute when its API is priced by the log's name, --model-map when the "
                "catalog model is what it is)"
            )

    def describe(self) -> str:
        what = "every model" if self.all_models else self.constraints.model
        return f"{what} for {self.demand.describe()}"


@dataclass(frozen=True)
class RecommendResult:
    """The search's result, its ``to_dict()`` (``data``, with its ``"id"`` once stored), and
    why it could not be stored (None when stored or not to be stored)."""

    recommendation: engine.Recommendation | FleetRecommendation
    data: dict[str, Any]
    not_stored: str | None = None

    @property
    def stored_id(self) -> int | None:
        stored: int | None = self.data.get("id")
        return stored


def recommend(
    request: RecommendRequest,
    sessions: SessionScope,
    *,
    progress: StageProgress | None = None,
    stage: Callable[[str], None] | None = None,
) -> RecommendResult:
    """The cheapest verified fleet for ``request``: ``progress(stage, done, total)`` follows the
    search's stages, ``stage(name)`` is told each step (reading prices, screen, storing)."""
    request.check()
    require(Action.SEARCH)
    said = stage or (lambda _: None)
    limit = WindowLimit(
        request.max_requests,
        request.options.verify_hours,
        request.demand.load_scale,
        request.names,
    )
    with sessions() as session:
        if session is None:
            raise StoreError("a recommendation reads its demand and prices from a store")
        # read even with --api never: they tell a proprietary model from an unknown name
        api_prices = api_inputs(session)
        request = _measured_api_latency(session, request)
        api_of = api_model_of(api_prices)
        request = _one_api_model(session, request, api_of)
        planned = None
        if not request.all_models:
            planned = planned_model(request.constraints.model, _substitutes(request), api_of)
            if planned.model is not None:  # the catalog model searched (a substitute's)
                constraints = replace(request.constraints, model=planned.model)
                request = replace(request, constraints=constraints)
        fleet = None
        if planned is None or planned.model is not None:  # a proprietary model: no GPU pools
            fleet = fleet_inputs(session, request, limit, api_of)
        extra_notes = _fleet_notes(session, request, api_of, api_prices, planned) if fleet else []
        if fleet is None:
            assert planned is not None
            demand = load_demand(
                session,
                request.demand,
                seed=request.options.seed,
                limit=limit,
                log_models=_log_models(session, request, planned, api_of),
            )
            limit.check(demand)
        if planned is None or planned.model is not None:
            said("reading prices")
            prices, profiles = search_inputs(session, request.constraints)
    engine_name = request.options.engine
    if fleet is not None:
        said("screen")
        found = recommend_fleet(
            fleet,
            prices,
            lambda gpu: choose_profile(profiles, gpu, engine_name),
            progress=progress,
            api_prices=api_prices if request.options.api != "never" else [],
        )
        found.notes.extend(extra_notes)
        return _result(found, request, sessions, said)
    assert planned is not None
    if planned.model is None:  # a proprietary model, no substitute: the API bill
        assert planned.api_model is not None
        bill = Request(demand, _targets(request, demand), request.constraints, request.options)
        return _result(api_only(bill, api_prices, planned.api_model), request, sessions, said)
    search = Request(
        demand,
        _targets(request, demand),
        request.constraints,
        replace(request.options, api_model=planned.api_model or request.options.api_model),
        accuracy_for(request.options.confidence, request.accuracy_file),
    )
    said("screen")
    result = engine.recommend(
        search,
        prices,
        lambda gpu: choose_profile(profiles, gpu, engine_name),
        progress=progress,
        api_prices=api_prices if request.options.api != "never" else [],
    )
    if planned.substitute is not None:
        result = PlannedRecommendation.of(result, planned.substitute)
    return _result(result, request, sessions, said)


def _result(
    found: engine.Recommendation | FleetRecommendation,
    request: RecommendRequest,
    sessions: SessionScope,
    said: Callable[[str], None],
) -> RecommendResult:
    """The search's result, stored when asked (never lost to a failed save)."""
    data = found.to_dict()
    if not request.save:
        return RecommendResult(found, data)
    said("storing")
    not_stored = save_retrying(sessions, found, data)
    if not_stored is None:
        record(sessions, Action.SEARCH, f"recommendation {data['id']}", _searched(request))
    return RecommendResult(found, data, not_stored)


def _searched(request: RecommendRequest) -> str:
    """What a stored search was for, in the audit trail's words."""
    return f"for {request.demand.describe()}"


def _targets(request: RecommendRequest, demand: Demand, model: str | None = None) -> Targets:
    """The targets of ``demand``'s classes: the default, then the model's own
    (``--slo MODEL:ttft=...``), then each class's (``--slo CLASS:...``)."""
    unknown = [c for c in request.constraints.spot_classes if c not in demand.classes]
    if unknown:
        raise UsageError(
            f"--spot-class: the demand has no class {shown(unknown[0])}; its classes "
            f"(closest first): {closest(unknown[0], demand.classes)}"
        )
    per_model, per_class = split_model_slos(request.class_slos)
    default = request.slo
    for name, spec in per_model:
        if model is None or name == model:
            default = class_slos(("model",), [f"model:{spec}"], default)["model"]
    slos = class_slos(demand.classes, per_class, default)
    return Targets(slos, request.min_attainment)


def split_model_slos(items: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[str]]:
    """``--slo`` items naming a catalog model (by name or alias): (model, targets); the rest
    name request classes."""
    per_model: list[tuple[str, str]] = []
    per_class: list[str] = []
    for item in items:
        name, sep, spec = item.partition(":")
        model = catalog_model_of(name) if sep and name else None
        if model is not None:
            per_model.append((model, spec))
        else:
            per_class.append(item)
    return per_model, per_class


# ---------------------------------------------------------------------------------------------
# A log of several models


def _log_models(
    session: Session, request: RecommendRequest, planned: PlannedModel, api_of: ApiModelOf
) -> list[str | None] | None:
    """The log names of the model planned (the catalog model, or the proprietary model without
    a substitute) when a dataset logs several (None: take every request, as for a log of one
    model)."""
    if request.demand.dataset is None:
        return None
    asked = planned.model or planned.api_model or request.constraints.model
    resolution = _resolution(session, request, api_of, default=asked)
    if set(resolution.counts) <= {None}:
        return None  # a log without model names: every request is the model asked for
    if planned.substitute is not None:  # the substituted log model's requests, only
        log_model = planned.substitute["log_model"]
        substituted = substituted_names(
            resolution.counts, {log_model: asked}, api_of, resolution.source
        )
        names: list[str | None] = list(substituted)
    else:
        if planned.model is None:
            asked = api_of(asked) or asked  # the proprietary model as the price sheet names it
        wanted = resolution.only(asked)
        models = wanted.models()
        names = (
            wanted.log_names(models[0]) if models else wanted.api_log_names(wanted.api_models()[0])
        )
    return None if set(names) == set(resolution.counts) else names


def _substitutes(request: RecommendRequest) -> dict[str, str]:
    """--substitute LOGNAME=CATALOG items: {log name: catalog model}."""
    return parse_model_map(request.substitutes, "--substitute")


def _resolution(
    session: Session,
    request: RecommendRequest,
    api_of: ApiModelOf | None = None,
    default: str | None = None,
) -> ModelResolution:
    """The dataset's log names mapped to catalog models (--model-map, --substitute), the
    proprietary ones told apart (``api_of``); ``default``: the model of a log without model
    names (the one asked for)."""
    assert request.demand.dataset is not None
    resolution = dataset_models(
        session,
        request.demand.dataset,
        model_map=parse_model_map(request.model_map),
        unmapped=request.unmapped,
        default=None if request.all_models else (default or request.constraints.model),
        start=request.demand.window[0],
        end=request.demand.window[1],
        api_model_of=api_of,
        substitutes=_substitutes(request),
    )
    if request.all_models and set(resolution.counts) <= {None}:
        raise UsageError(
            f"dataset {shown(request.demand.dataset)} logs no model names: name the model "
            "its requests are for with --model"
        )
    return resolution


def _one_api_model(
    session: Session, request: RecommendRequest, api_of: ApiModelOf
) -> RecommendRequest:
    """A log of every model (no --model) whose only model is a proprietary one: planned as
    that model (its API bill), not as a fleet of GPU pools it has no place in. A log of
    several proprietary models and no catalog model is a UsageError saying what plans them."""
    if not request.all_models or request.demand.dataset is None:
        return request
    resolution = _resolution(session, request, api_of)
    api_models = resolution.api_models()
    if resolution.models() or not api_models:
        return request
    if len(api_models) > 1:
        listed = ", ".join(shown_name(m) for m in api_models)
        raise UsageError(
            f"{resolution.source} logs only proprietary models ({listed}): none has a "
            "self-hosted option. Plan one's API bill with --model NAME, bill them all with "
            f"`planner prices bill --dataset {request.demand.dataset}`, or name catalog models "
            f"to serve in their place with --substitute {api_models[0]}=CATALOG"
        )
    return replace(
        request,
        all_models=False,
        size_buckets=None,
        constraints=replace(request.constraints, model=api_models[0], alternative_models=()),
    )


def _fleet_notes(
    session: Session,
    request: RecommendRequest,
    api_of: ApiModelOf,
    api_prices: list[Any],
    planned: PlannedModel | None,
) -> list[str]:
    """What a fleet says beside its pools: each substitution's quality note (the planned
    model's, for one model split by size), and each proprietary model of a log left out of
    the GPU fleet with its API bill (its requests, on the cheapest offer)."""
    if planned is not None:
        return [quality_note(planned.substitute)] if planned.substitute else []
    notes = [
        quality_note({"log_model": n, "catalog_model": c}) for n, c in _substitutes(request).items()
    ]
    if request.demand.dataset is None:
        return notes
    resolution = _resolution(session, request, api_of)
    for model in resolution.api_models():
        names = resolution.api_log_names(model)
        requests = sum(resolution.counts.get(n, 0) for n in names)
        share = requests / resolution.total if resolution.total else 0.0
        bill = _api_bill(session, request, model, names, api_prices)
        notes.append(
            f"left {shown_name(model)} ({requests:,} requests, {share:.1%}) out of the GPU "
            f"fleet: {bill}. " + no_self_hosted_note(model)
        )
    return notes


def _api_bill(
    session: Session,
    request: RecommendRequest,
    model: str,
    names: list[str | None],
    api_prices: list[Any],
) -> str:
    """A proprietary model's requests as its cheapest API offer bills them a month, in words."""
    from planner.recommend.api import choose

    if request.options.api == "never":
        return "per-token APIs only, and --api never leaves them out"
    choice = request.demand
    assert choice.dataset is not None
    workload = from_dataset(
        session,
        choice.dataset,
        load_scale=choice.load_scale,
        start=choice.window[0],
        end=choice.window[1],
        seed=request.options.seed,
        log_models=names,
    )
    demand = Demand.from_workload(workload, f"dataset {choice.dataset} {model}")
    offers = api_prices_for(model, api_prices, provider=request.options.api_provider)
    bill = Request(demand, _targets(request, demand), replace(request.constraints, model=model))
    found = choose(bill, offers, [], None, None, "only")
    if found is None:
        return f"no offer of --api-provider {request.options.api_provider} serves it"
    price, usd = found.offers[0]
    return f"{price.provider} {price.offer} bills them {dollars(usd)}/month"


def fleet_inputs(
    session: Session,
    request: RecommendRequest,
    limit: WindowLimit,
    api_of: ApiModelOf | None = None,
) -> FleetRequest | None:
    """The fleet search's inputs when the request needs one: a dataset of several models
    planned together (no --model), or --size-buckets; None: the single-pool search. A
    proprietary model of the log (``api_of``) is left out of the GPU fleet (see
    :func:`_fleet_notes`)."""
    demand = request.demand
    several = request.all_models
    if not several and request.size_buckets is None:
        return None
    accuracy = accuracy_for(request.options.confidence, request.accuracy_file)
    if len(demand.forecast_ids) > 1:  # one forecast per model
        models = _forecast_models(session, request, limit)
        note = None
    elif demand.dataset is None:  # a demand curve: one model, split by size
        one = load_demand(session, demand, seed=request.options.seed, limit=limit)
        limit.check(one)
        model = request.constraints.model
        models = [ModelDemand(model, one, _targets(request, one, model))]
        note = None
    else:
        resolution = _resolution(session, request, api_of)
        wanted = (
            resolution.models()
            if several
            else [resolution.only(request.constraints.model).models()[0]]
        )
        models = _model_demands(session, request, resolution, wanted, limit)
        note = resolution.skipped_note()
    first = models[0]
    template = Request(
        first.demand,
        first.targets,
        replace(request.constraints, model=first.model, alternative_models=()),
        request.options,
        accuracy,
    )
    buckets = request.size_buckets if request.size_buckets is not None else ()
    return FleetRequest(
        tuple(models), template, buckets, note, demand.describe(), colocate=request.colocate
    )


def _model_demands(
    session: Session,
    request: RecommendRequest,
    resolution: ModelResolution,
    models: list[str],
    limit: WindowLimit,
) -> list[ModelDemand]:
    """Each model's requests replayed over the same hours (time zero: the window's start, or
    the dataset's first request in it)."""
    choice = request.demand
    assert choice.dataset is not None
    counted = hourly_counts(session, choice.dataset, choice.window)
    if counted is None:
        raise UsageError(f"dataset {shown(choice.dataset)} has no requests in the window")
    limit.check_replay(choice.dataset, counted[0], counted[1], choice.load_scale)
    zero = choice.window[0] or _first_arrival(session, choice.dataset, choice.window)
    hours = len(counted[0])
    found = []
    for model in models:
        names = resolution.log_names(model)
        workload = from_dataset(
            session,
            choice.dataset,
            load_scale=choice.load_scale,
            start=zero,
            end=choice.window[1],
            seed=request.options.seed,
            log_models=names,
        )
        scale = f" x {choice.load_scale:g}" if choice.load_scale != 1 else ""
        demand = demand_over_hours(workload, hours, f"dataset {choice.dataset} {model}{scale}")
        limit.check(demand)
        found.append(ModelDemand(model, demand, _targets(request, demand, model), tuple(names)))
    return found


def _forecast_models(
    session: Session, request: RecommendRequest, limit: WindowLimit
) -> list[ModelDemand]:
    """One model per stored forecast: the catalog model its log model maps to (--model-map),
    its demand curve, and lengths from that model's requests in the forecast's dataset."""
    found: dict[str, ModelDemand] = {}
    for forecast_id in request.demand.forecast_ids:
        stored = stored_demand(session, forecast_id)
        if stored.model is None:
            raise UsageError(
                f"forecast #{forecast_id} is of every model of its log summed: forecast each "
                "model (`planner forecast --model NAME`) to plan them as a fleet"
            )
        resolution = resolve_models(
            {stored.model: 1},
            model_map=parse_model_map(request.model_map),
            source=f"forecast #{forecast_id}",
        )
        model = resolution.models()[0]
        if model in found:
            raise UsageError(
                f"forecast #{forecast_id} is of {model} too: give one forecast per model"
            )
        demand = forecast_demand(session, forecast_id, None, request.demand.load_scale)
        limit.check(demand)
        found[model] = ModelDemand(model, demand, _targets(request, demand, model), (stored.model,))
    aligned = common_hours({m: d.demand for m, d in found.items()})
    return [replace(d, demand=aligned[m]) for m, d in found.items()]


def _first_arrival(session: Session, name: str, window: Window) -> datetime:
    dataset = get_dataset(session, name)
    where = [RequestRow.dataset_id == dataset.id]
    if window[1] is not None:
        where.append(RequestRow.arrival_us < _micros(window[1]))
    first = session.execute(select(func.min(RequestRow.arrival_us)).where(*where)).scalar_one()
    return EPOCH + timedelta(microseconds=int(first))


def demand_over_hours(workload: Workload, hours: int, source: str) -> Demand:
    """A replayed workload's demand counted over ``hours`` hours from its time zero (every
    model of a fleet over the same hours, whenever its own requests end)."""
    if len(workload) == 0:
        raise UsageError(f"{source}: no requests to plan for")
    hour = np.minimum((workload.arrival_s // HOUR_S).astype(np.intp), hours - 1)
    counts = np.bincount(hour, minlength=hours).astype(np.float64)
    return Demand(
        RateCurve(workload.start, counts),
        workload.input_tokens,
        np.maximum(workload.output_tokens, 1),
        source,
        workload,
    )


# ---------------------------------------------------------------------------------------------
# Loading: the demand, the prices and the profiles


def load_demand(
    session: Session,
    choice: DemandChoice,
    *,
    seed: int = 0,
    limit: WindowLimit | None = None,
    log_models: list[str | None] | None = None,
) -> Demand:
    """The demand ``choice`` names (see :func:`demand_for`; a dataset's requests only of the
    models logged as ``log_models`` when given)."""
    names = {"load_scale": limit.names.load_scale} if limit is not None else None
    return demand_for(
        session,
        dataset=choice.dataset,
        forecast_id=choice.forecast_id,
        csv=choice.csv,
        tokens_from=choice.tokens_from,
        load_scale=choice.load_scale,
        window=choice.window,
        log_models=log_models,
        seed=seed,
        limit=limit,
        names=names,
    )


def demand_for(
    session: Session,
    *,
    dataset: str | None = None,
    forecast_id: int | None = None,
    csv: Path | str | None = None,
    tokens_from: str | None = None,
    load_scale: float = 1.0,
    window: Window = (None, None),
    seed: int = 0,
    limit: WindowLimit | None = None,
    names: Mapping[str, str] | None = None,
    log_models: list[str | None] | None = None,
) -> Demand:
    """The demand to plan for: exactly one of an ingested ``dataset`` (replayed, optionally
    only its requests in ``window``), a stored forecast (``forecast_id``) or a demand-curve
    ``csv``; the latter two draw request lengths from dataset ``tokens_from`` (a forecast
    defaults to the dataset it was fitted on). Every hour's load is multiplied by
    ``load_scale``. ``names`` says how a message names the inputs (``load_scale``,
    ``tokens_from``): the CLI's options by default."""
    said = {"load_scale": "--load-scale", "tokens_from": "--tokens-from", **(names or {})}
    given = [v for v in (dataset, forecast_id, csv) if v is not None]
    if len(given) != 1:
        raise UsageError(
            "give exactly one demand: a dataset (its logged requests), a stored forecast's "
            "demand curve, or a demand-curve CSV"
        )
    check_load_scale(load_scale, said["load_scale"])
    if dataset is not None:
        if not dataset.strip():
            raise UsageError("the dataset name is empty: name an ingested dataset")
        if tokens_from is not None:
            raise UsageError(
                f"{said['tokens_from']} goes with a demand curve: a dataset replays its own "
                "requests, lengths included"
            )
        return dataset_demand(
            session,
            dataset,
            load_scale=load_scale,
            window=window,
            seed=seed,
            limit=limit,
            log_models=log_models,
        )
    if window != (None, None):
        raise UsageError("a window picks requests of a dataset; a demand curve is planned whole")
    if forecast_id is not None:
        return forecast_demand(
            session, forecast_id, tokens_from, load_scale, tokens_option=said["tokens_from"]
        )
    assert csv is not None
    return curve_demand(session, csv, tokens_from, load_scale, tokens_option=said["tokens_from"])


def dataset_demand(
    session: Session,
    name: str,
    *,
    load_scale: float = 1.0,
    window: Window = (None, None),
    seed: int = 0,
    limit: WindowLimit | None = None,
    log_models: list[str | None] | None = None,
) -> Demand:
    """The demand of an ingested dataset: its requests (only those of ``log_models`` when
    given), replayed (lengths included); with a ``limit``, its busiest hours and its size are
    checked before it is read."""
    if limit is not None:
        counted = hourly_counts(session, name, window)
        if counted is not None:  # none: from_dataset says what is missing
            limit.check_replay(name, counted[0], counted[1], load_scale)
    workload = from_dataset(
        session,
        name,
        load_scale=load_scale,
        start=window[0],
        end=window[1],
        seed=seed,
        log_models=log_models,
    )
    scale = f" x {load_scale:g}" if load_scale != 1 else ""
    return Demand.from_workload(workload, f"dataset {name}{scale}")


def hourly_counts(
    session: Session, name: str, window: Window
) -> tuple[NDArray[np.float64], int] | None:
    """A stored dataset's requests in each hour of ``window`` (from its start, or from its
    first request), and their total; None when the window holds none."""
    dataset = get_dataset(session, name)
    where = [RequestRow.dataset_id == dataset.id]
    if window[0] is not None:
        where.append(RequestRow.arrival_us >= _micros(window[0]))
    if window[1] is not None:
        where.append(RequestRow.arrival_us < _micros(window[1]))
    first, total = session.execute(
        select(func.min(RequestRow.arrival_us), func.count()).where(*where)
    ).one()
    if not total:
        return None
    zero = _micros(window[0]) if window[0] is not None else int(first)
    hour = (RequestRow.arrival_us - zero) // int(HOUR_S * 1_000_000)
    counts = session.execute(select(hour, func.count()).where(*where).group_by(hour)).all()
    rates = np.zeros(int(max(h for h, _ in counts)) + 1)
    for h, n in counts:
        rates[int(h)] = n
    return rates, int(total)


def _micros(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def forecast_demand(
    session: Session,
    forecast_id: int,
    tokens_from: str | None = None,
    load_scale: float = 1.0,
    *,
    tokens_option: str = "--tokens-from",
) -> Demand:
    """A stored forecast's demand curve, with request lengths drawn from ``tokens_from`` (by
    default the dataset the forecast was fitted on)."""
    stored = stored_demand(session, forecast_id)
    curve = RateCurve(stored.curve.start, stored.curve.requests_per_hour * load_scale)
    source = stored.label + (f" x {load_scale:g}" if load_scale != 1 else "")
    log_models = None
    if tokens_from is None:
        if stored.dataset is None:
            raise UsageError(
                f"forecast #{forecast_id} was not fitted on a stored dataset: give "
                f"{tokens_option} DATASET for the request lengths"
            )
        tokens_from = stored.dataset
        # a forecast of one model of a log: that model's lengths
        if stored.model is not None:
            log_models = _forecast_log_names(session, tokens_from, stored.model)
    inputs, outputs = token_pool(session, tokens_from, log_models=log_models)
    return Demand(curve, inputs, outputs, source)


def _forecast_log_names(session: Session, dataset: str, model: str) -> list[str | None]:
    """The log names of a forecast's model in its dataset: the name as logged, or (a forecast
    of a catalog model, ``planner forecast --model llama-3.1-8b``) every name mapped to it."""
    resolution = dataset_models(session, dataset, unmapped="skip")
    if model in resolution.counts:
        return [model]
    catalog = catalog_model_of(model)
    names = resolution.log_names(catalog) if catalog is not None else []
    return names or [model]


def curve_demand(
    session: Session,
    path: Path | str,
    tokens_from: str | None,
    load_scale: float = 1.0,
    *,
    tokens_option: str = "--tokens-from",
    curve_option: str = "--demand CSV",
) -> Demand:
    """A demand curve from a CSV (``ds,y``: hour start, requests in that hour), with request
    lengths drawn from dataset ``tokens_from``."""
    curve = read_rate_curve(path)
    if tokens_from is None:
        raise UsageError(f"{curve_option} needs {tokens_option} DATASET for the request lengths")
    inputs, outputs = token_pool(session, tokens_from)
    return Demand(
        RateCurve(curve.start, curve.requests_per_hour * load_scale),
        inputs,
        outputs,
        f"file {printable(str(path), 200)}" + (f" x {load_scale:g}" if load_scale != 1 else ""),
    )


def search_inputs(
    session: Session, constraints: Constraints
) -> tuple[list[PricePoint], list[Profile]]:
    """The prices to search (the bundled list prices are loaded on first use) with every
    provider, region and GPU the constraints name checked against them, and the calibration
    profiles (stored ones first)."""
    ensure_list_prices(session)
    for name in constraints.providers:
        check_filters(session, provider=name)
    for name in constraints.regions:
        check_filters(session, region=name)
    for name in constraints.gpus:
        check_filters(session, gpu=name)
    return latest_prices(session), known_profiles(session)


def _measured_api_latency(session: Session, request: RecommendRequest) -> RecommendRequest:
    """The API's latency from a stored bench run against it (``--api-latency-from``): its
    successful requests' medians and spread replace the assumed ones."""
    name = request.options.api_latency_run
    if not name:
        return request
    from planner.recommend.overflow import (
        MIN_MEASURED,
        measured_api_latency,
        summarized_api_latency,
    )
    from planner.store.bench_runs import get_run, run_requests

    run = get_run(session, name)
    frame = run_requests(session, run.id)
    ok = frame[frame["status"] == "ok"]
    where = f"--api-latency-from {run.name}"
    if len(ok) >= MIN_MEASURED:
        ttft, tpot, sigma = measured_api_latency(
            ok["ttft_ms"].to_numpy(np.float64), ok["tpot_ms"].to_numpy(np.float64), where
        )
        how = f"{len(ok):,} requests"
    else:  # an imported summary without its requests
        ttft, tpot, sigma = summarized_api_latency(run.summary or {}, where)
        how = "its summary's medians and P99s"
    options = replace(
        request.options,
        api_ttft_s=ttft,
        api_tpot_s=tpot,
        api_sigma=sigma,
        api_latency_run=f"{run.name} (#{run.id}, {how})",
    )
    return replace(request, options=options)


def api_inputs(session: Session) -> list[Any]:
    """The per-token API prices in force (the bundled snapshot loaded on first use)."""
    from pricing.api_sheets import api_entries, ensure_api_prices

    ensure_api_prices(session)
    return [entry.price for entry in api_entries(session)]


@dataclass(frozen=True)
class SearchChoices:
    """What a search form offers: the datasets, the stored forecasts that carry a demand curve
    (id -> label), and the providers and GPUs of the prices in force (empty before any price
    is loaded: a search loads the bundled list prices first)."""

    datasets: list[str]
    forecasts: dict[int, str]
    providers: list[str]
    gpus: list[str]


def search_choices(sessions: SessionScope) -> SearchChoices:
    """The choices a search form offers, read from the store."""
    from planner.store.forecasts import list_forecasts
    from planner.store.queries import list_datasets

    with sessions() as session:
        if session is None:
            raise StoreError("a recommendation reads its demand and prices from a store")
        datasets = [d.name for d in list_datasets(session)]
        forecasts = {
            run.id: f"#{run.id}: {run.source}, {run.horizon_hours} h ahead"
            + (f" at q{run.demand_quantile:g}" if run.demand_quantile is not None else "")
            for run in list_forecasts(session)
            if run.demand_quantile is not None
        }
        prices = latest_prices(session)
    return SearchChoices(
        datasets,
        forecasts,
        sorted({p.provider.value for p in prices}),
        sorted({p.gpu_model for p in prices}),
    )


# ---------------------------------------------------------------------------------------------
# Storing


def save_retrying(
    sessions: SessionScope,
    result: engine.Recommendation | FleetRecommendation,
    data: dict[str, Any],
    *,
    wait_s: float = 1.0,
) -> str | None:
    """Store ``result`` and put its id into ``data`` (its ``to_dict()``); a store busy with
    another writer is tried again. Returns why it could not be stored (None once stored): a
    search's result is never lost to a failed save, its caller still holds it."""
    reason = ""
    for attempt in range(1, SAVE_ATTEMPTS + 1):
        try:
            with sessions() as session:
                if session is None:
                    return "there is no store to keep it in"
                data["id"] = save_recommendation(session, result).id
            return None
        except (SQLAlchemyError, PlannerError, OSError) as exc:
            data.pop("id", None)
            reason = failure_reason(exc)
            busy = "locked" in reason or "busy" in reason
            if not busy or attempt == SAVE_ATTEMPTS:
                break
            time.sleep(wait_s)
    return reason


def failure_reason(exc: BaseException) -> str:
    """One line about a store failure, without the SQL statement and its parameters."""
    if isinstance(exc, PlannerError):
        return str(exc)
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).splitlines()[0] if str(exc) else ""
    return f"{type(orig or exc).__name__}: {text}" if text else type(orig or exc).__name__
