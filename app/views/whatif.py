"""What-if simulator: one configuration (GPU, model and precision, tensor parallelism, engine
limits, a fixed fleet, an hourly schedule or autoscaling, spot interruptions, caches, load
scale) served a dataset replayed or a stored forecast's demand curve, through the
discrete-event simulator. Latency percentiles and CDFs against the SLO targets, SLO attainment,
cost per purchase option, replicas, queue and busy share over time; the last runs are kept so
two can be compared side by side.

The run is described as ``planner.simulate.inputs.WhatIf`` and simulated by the use case
``planner.usecases.simulate.simulate``, exactly as ``planner simulate`` runs it (same checks,
same limits on the run's size).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import common
from planner.common.csvsafe import csv_bytes
from planner.errors import PlannerError
from planner.latency.engines import get_engine
from planner.simulate.fleet import ROUTERS
from planner.simulate.inputs import (
    DEFAULT_API_TPOT_S,
    DEFAULT_API_TTFT_S,
    DEFAULT_MAX_REQUESTS,
    MAX_SEQS,
    REQUESTS_PER_REPLICA,
    ApiOverflow,
    DemandSource,
    Disaggregation,
    FleetSettings,
    InstancePrices,
    ReplicaPrices,
    WhatIf,
    build_fleet,
    curve_window,
    estimated_seconds,
    fleet_size,
    scaled_curve,
    schedule_counts,
)
from planner.simulate.metrics import SLO
from planner.simulate.results import (
    LATENCIES,
    cost_table,
    headline,
    percentile_table,
    read_requests,
    request_cdfs,
)
from planner.simulate.run import ServingSpec
from planner.usecases.simulate import (
    SimulateRequest,
    api_price_offers,
    demand_forecasts,
    forecast_demand,
    replica_price_options,
    simulate,
    simulation_datasets,
)
from planner.workload.model_names import parse_model_map
from planner.workload.rates import RateCurve

RUNS_KEY = "whatif-runs"  # this session's last runs, oldest first
KEPT_RUNS = 6
DEFAULTS = {"gpu": "L4", "model": "llama-3.1-8b", "precision": "bf16"}
SOURCES = ("Replay a dataset", "A forecast's demand curve")
FLEETS = ("Fixed replicas", "Hourly schedule", "Autoscaling")
PRICE_SOURCES = ("From the price sheet", "By hand", "No cost")
# how a refusal names the page's price inputs (the CLI's options otherwise)
PRICE_NAMES = {
    "on-demand": "an on-demand price per replica-hour",
    "spot": "a spot price per replica-hour",
    "reserved": "a reserved price per replica-hour",
}
RUN_COLOURS = ("#636EFA", "#EF553B")  # the two runs compared
METRIC_COLOURS = {"ttft": "#636EFA", "tpot": "#EF553B", "e2e": "#00CC96"}
SLO_FIELDS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s"}


# --- cached store reads: keyed on the store and its contents --------------------------------------


@st.cache_data(show_spinner=False)
def _datasets(url: str, version: str) -> dict[str, int]:
    """Dataset name -> requests, oldest first."""
    return simulation_datasets(common.session)


@st.cache_data(show_spinner=False)
def _forecasts(url: str, version: str) -> dict[int, str]:
    """Stored forecasts with a demand curve: id -> label."""
    return demand_forecasts(common.session)


@st.cache_data(show_spinner=False)
def _demand(url: str, version: str, forecast_id: int) -> tuple[RateCurve, str, str | None]:
    found = forecast_demand(forecast_id, common.session)
    return found.curve, found.label, found.dataset


@st.cache_data(show_spinner=False)
def _instances(url: str, version: str, gpu: str, tp: int) -> list[InstancePrices]:
    return replica_price_options(gpu, tp, common.session)


@st.cache_data(show_spinner=False)
def _api_offers(url: str, version: str, model: str) -> list[str]:
    return api_price_offers(model, common.session)


# --- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    whatif: WhatIf
    slo_ms: dict[str, float | None]  # the targets drawn on the CDFs
    label: str
    estimate: float | None  # requests the run is expected to simulate


def _optional(value: float | None) -> float | None:
    return None if value is None or value <= 0 else float(value)


def _demand_inputs(
    datasets: dict[str, int], forecasts: dict[int, str]
) -> tuple[DemandSource | None, float | None]:
    st.subheader("Requests")
    names = list(datasets)
    source = st.radio(
        "Arrivals",
        SOURCES if forecasts else SOURCES[:1],
        horizontal=True,
        key="whatif-source",
    )
    columns = st.columns(4)
    if source == SOURCES[0]:
        return _dataset_inputs(datasets, columns)
    ids = list(forecasts)
    forecast_id = columns[0].selectbox(
        "Forecast", ids, format_func=lambda i: forecasts[i], key="whatif-forecast"
    )
    curve, label, fitted_on = _demand(common.store_url(), common.version(), forecast_id or ids[0])
    lengths = columns[1].selectbox(
        "Request lengths from",
        names,
        index=common.option_index(names, fitted_on),
        key="whatif-lengths",
    )
    first_hour = columns[2].number_input(
        "From hour", min_value=1, max_value=curve.hours, value=1, step=1, key="whatif-first-hour"
    )
    hours = columns[3].number_input(
        "Hours", min_value=1, max_value=curve.hours, value=1, step=1, key="whatif-hours"
    )
    more = st.columns(4)
    load_scale = more[0].number_input(
        "Load scale",
        min_value=1e-6,
        value=0.001,
        step=0.001,
        format="%g",
        key="whatif-curve-scale",
        help="Every hour's forecast requests multiplied by this.",
    )
    cv = more[1].number_input(
        "Burstiness (CV of inter-arrival times)",
        min_value=0.05,
        max_value=100.0,
        value=1.0,
        step=0.1,
        key="whatif-cv",
        help="1: Poisson arrivals; above 1 burstier.",
    )
    with common.shown_errors():
        window = scaled_curve(curve_window(curve, int(first_hour) - 1, int(hours)), load_scale)
        first = window.start
        demand = DemandSource(
            rates=window,
            rates_label=f"{label}, {window.hours} h from {first:%Y-%m-%d %H:%M} UTC "
            f"x {load_scale:g}",
            tokens_from=lengths,
            cv=float(cv),
        )
        return demand, window.total_requests
    return None, None


def _dataset_inputs(
    datasets: dict[str, int], columns: Sequence[Any]
) -> tuple[DemandSource | None, float | None]:
    """A dataset's requests replayed: which dataset, at what load, and how a log of several
    models maps to the model simulated."""
    names = list(datasets)
    dataset = columns[0].selectbox(
        "Dataset",
        names,
        index=common.option_index(names, st.query_params.get("dataset")),  # ?dataset=NAME
        key="whatif-dataset",
    )
    load_scale = columns[1].number_input(
        "Load scale",
        min_value=1e-6,
        value=1.0,
        step=0.05,
        format="%g",
        key="whatif-load-scale",
        help="1 replays the log as it is; 0.5 keeps each request with probability 1/2; "
        "2 replays it twice over.",
    )
    model_map, unmapped = _log_model_inputs(columns[2], columns[3])
    with common.shown_errors():
        demand = DemandSource(
            dataset=dataset,
            load_scale=float(load_scale),
            model_map=parse_model_map(model_map.split(",") if model_map else []),
            unmapped=unmapped,
        )
        return demand, datasets.get(str(dataset), 0) * float(load_scale)
    return None, None


def _log_model_inputs(left: Any, right: Any) -> tuple[str, str]:
    """How a log of several models maps to the model simulated: its names mapped by hand
    (``--model-map``), and what to do with names the catalog lacks (``--unmapped``)."""
    model_map = left.text_input(
        "Map log model names",
        value="",
        key="whatif-model-map",
        placeholder="our-llama=llama-3.1-8b",
        help="For a log of several models: LOGNAME=CATALOG pairs, comma-separated, for names "
        "the catalog does not know. Only the requests of the model simulated are replayed.",
    )
    unmapped = right.selectbox(
        "Log names the catalog lacks",
        ["error", "skip"],
        format_func=lambda v: "stop and list them" if v == "error" else "leave their requests out",
        key="whatif-unmapped",
    )
    return str(model_map).strip(), str(unmapped)


def _serving_inputs() -> ServingSpec:
    st.subheader("Each replica")
    choice, second = common.deployment_inputs("whatif", DEFAULTS)
    gpu, model, precision, tp, engine = (
        choice.gpu,
        choice.model,
        choice.precision,
        choice.tp,
        choice.engine,
    )
    max_seqs = second[0].number_input(
        "Max sequences per batch",
        min_value=1,
        max_value=MAX_SEQS,
        value=None,
        step=1,
        placeholder=f"engine default ({get_engine(engine).max_seqs:,})",
        key="whatif-max-seqs",
    )
    chunked = second[1].toggle("Chunked prefill", value=True, key="whatif-chunked")
    prefix = second[2].toggle("Prefix cache", value=True, key="whatif-prefix-cache")
    prefix_hit = 0.0
    if prefix:
        prefix_hit = st.slider(
            "Prefix hit rate (share of prompt tokens cached, for logs without block ids)",
            min_value=0.0,
            max_value=0.95,
            value=0.0,
            step=0.05,
            key="whatif-prefix-hit",
        )
    return ServingSpec(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=int(tp),
        max_seqs=int(max_seqs) if max_seqs is not None else None,
        chunked_prefill=chunked,
        prefix_caching=prefix,
        prefix_hit_rate=float(prefix_hit),
        engine=engine,
    )


def _fleet_inputs() -> FleetSettings:
    st.subheader("Fleet")
    kind = st.radio("Replicas", FLEETS, horizontal=True, key="whatif-fleet")
    columns = st.columns(4)
    if kind == FLEETS[0]:
        fleet = FleetSettings(
            replicas=int(
                columns[0].number_input(
                    "On-demand", min_value=0, value=1, step=1, key="whatif-on-demand"
                )
            ),
            spot=int(columns[1].number_input("Spot", min_value=0, value=0, key="whatif-spot")),
            reserved=int(
                columns[2].number_input("Reserved", min_value=0, value=0, key="whatif-reserved")
            ),
        )
    elif kind == FLEETS[1]:
        text = columns[0].text_input(
            "On-demand replicas per hour",
            value="1,1,2,2",
            key="whatif-schedule",
            help="One count per hour from the start, commas or spaces: 2,2,4,6",
        )
        fleet = FleetSettings(schedule=tuple(schedule_counts(text)))
    else:
        fleet = FleetSettings(
            autoscale=True,
            min_replicas=int(
                columns[0].number_input("Min replicas", min_value=0, value=1, key="whatif-min")
            ),
            max_replicas=int(
                columns[1].number_input("Max replicas", min_value=1, value=8, key="whatif-max")
            ),
            target_utilization=columns[2].slider(
                "Target busy share", 0.1, 1.0, 0.7, 0.05, key="whatif-target"
            ),
            cold_start_s=columns[3].number_input(
                "Cold start (s)", min_value=0.0, value=45.0, step=5.0, key="whatif-cold-start"
            ),
        )
    more = st.columns(4)
    spot_rate = more[0].number_input(
        "Spot interruptions per replica-hour",
        min_value=0.0,
        max_value=3600.0,
        value=0.0,
        step=0.05,
        key="whatif-spot-rate",
    )
    router = more[1].selectbox(
        "Router",
        ROUTERS,
        index=common.option_index(list(ROUTERS), "least-requests"),
        key="whatif-router",
    )
    response_cache = more[2].slider(
        "Response-cache hit rate", 0.0, 0.95, 0.0, 0.05, key="whatif-response-cache"
    )
    return replace(
        fleet,
        spot_interruptions_per_hour=float(spot_rate),
        router=str(router),
        response_cache_hit_rate=float(response_cache),
    )


NOT_PRICED = "Not priced"


def _api_inputs(model: str) -> ApiOverflow | None:
    """A per-token API behind the fleet (``planner simulate --api-overflow-queue``): when it
    takes an arrival, its latency and rate limit, and the offer that prices its tokens."""
    on = st.toggle(
        "API behind the fleet",
        value=False,
        key="whatif-api",
        help="A per-token API takes an arrival when every replica up already holds the "
        "overflow queue or more, unless its rate limit is spent; it answers with its own "
        "latency. Its requests count in the latency percentiles.",
    )
    if not on:
        return None
    columns = st.columns(6)
    queue = columns[0].number_input(
        "Overflow queue (requests per replica)",
        min_value=0,
        value=8,
        step=1,
        key="whatif-api-queue",
    )
    ttft = columns[1].number_input(
        "API TTFT median (ms)", min_value=1.0, value=DEFAULT_API_TTFT_S * 1e3, key="whatif-api-ttft"
    )
    tpot = columns[2].number_input(
        "API TPOT median (ms)", min_value=0.1, value=DEFAULT_API_TPOT_S * 1e3, key="whatif-api-tpot"
    )
    limits = [
        column.number_input(
            label, min_value=1.0, value=None, step=step, placeholder="no limit", key=key
        )
        for column, label, step, key in (
            (columns[3], "Rate limit (requests/min)", 10.0, "whatif-api-rpm"),
            (columns[4], "Rate limit (tokens/min)", 10_000.0, "whatif-api-tpm"),
        )
    ]
    offers = _api_offers(common.store_url(), common.version(), model)
    offer = columns[5].selectbox(
        "Price its tokens at",
        [NOT_PRICED, *offers],
        key="whatif-api-price",
        help="The per-token API prices in force (the Prices page), best match for the model first.",
    )
    return ApiOverflow(
        queue=int(queue),
        ttft_s=float(ttft) / 1e3,
        tpot_s=float(tpot) / 1e3,
        rpm=None if limits[0] is None else float(limits[0]),
        tpm=None if limits[1] is None else float(limits[1]),
        price=None if offer == NOT_PRICED else str(offer),
    )


NODE_LINK = "the node's NVLink (both roles on one node)"
TP_CHOICES = (1, 2, 4, 8)


def _role_inputs(serving: ServingSpec) -> Disaggregation | None:
    """Prefill and decode on pools of their own (``planner simulate --prefill-replicas``):
    each role's replicas and TP, the link the KV cache crosses."""
    apart = st.toggle(
        "Prefill and decode apart (disaggregated)",
        value=False,
        key="whatif-disagg",
        help="A prefill pool and a decode pool with their own queues; the prompt's KV cache "
        "crosses the link between them. The fleet's replica counts above then do not apply.",
    )
    if not apart:
        return None
    from planner.latency.disagg import load_link_table

    columns = st.columns(5)
    prefill = columns[0].number_input(
        "Prefill replicas", min_value=1, value=1, step=1, key="whatif-prefill-replicas"
    )
    decode = columns[1].number_input(
        "Decode replicas", min_value=1, value=1, step=1, key="whatif-decode-replicas"
    )
    index = TP_CHOICES.index(serving.tp) if serving.tp in TP_CHOICES else 0
    prefill_tp = columns[2].selectbox(
        "Prefill TP", TP_CHOICES, index=index, key="whatif-prefill-tp"
    )
    decode_tp = columns[3].selectbox("Decode TP", TP_CHOICES, index=index, key="whatif-decode-tp")
    link = columns[4].selectbox(
        "KV link",
        [NODE_LINK, *load_link_table().names()],
        key="whatif-kv-link",
        help="data/catalog/links.csv: NVLink inside a node, EFA, GPUDirect or InfiniBand "
        "between instances, plain Ethernet.",
    )
    return Disaggregation(
        int(prefill),
        int(decode),
        prefill_tp=int(prefill_tp),
        decode_tp=int(decode_tp),
        kv_link=None if link == NODE_LINK else str(link),
    )


def _price_inputs(gpu: str, tp: int) -> ReplicaPrices:
    instances = _instances(common.store_url(), common.version(), gpu, tp)
    sources = PRICE_SOURCES if instances else PRICE_SOURCES[1:]
    source = st.radio("Prices", sources, horizontal=True, key="whatif-price-source")
    if source == "No cost":
        return ReplicaPrices()
    if source == "By hand":
        columns = st.columns(3)
        values = [
            column.number_input(
                f"{name} ($ per replica-hour)",
                min_value=0.0,
                value=None,
                step=0.1,
                placeholder="none",
                key=f"whatif-price-{key}",
            )
            for column, name, key in zip(
                columns,
                ("On-demand", "Spot", "Reserved"),
                ("od", "spot", "reserved"),
                strict=True,
            )
        ]
        return ReplicaPrices(*values)
    labels = {i.label: i for i in instances}
    chosen = st.selectbox(
        f"Instance ({len(instances)} with {gpu}, cheapest per GPU first)",
        list(labels),
        key="whatif-instance",
    )
    instance = labels[str(chosen)]
    prices = instance.per_replica(tp)
    per_replica = {"on-demand": prices.on_demand, "spot": prices.spot, "reserved": prices.reserved}
    st.caption(
        f"{common.plural(instance.replicas_per_instance(tp), 'replica')} of "
        f"{common.plural(tp, 'GPU')} per instance; "
        + "; ".join(
            f"{name} {common.unit_price(price)} per replica-hour "
            f"({instance.points[name].purchase_option})"
            if price is not None
            else f"{name}: no price"
            for name, price in per_replica.items()
        )
    )
    return prices


def _slo_inputs() -> dict[str, float | None]:
    columns = st.columns(3)
    return {
        "ttft": _optional(
            columns[0].number_input(
                "TTFT target (ms)", min_value=0.0, value=2000.0, step=100.0, key="whatif-slo-ttft"
            )
        ),
        "tpot": _optional(
            columns[1].number_input(
                "TPOT target (ms)", min_value=0.0, value=200.0, step=10.0, key="whatif-slo-tpot"
            )
        ),
        "e2e": _optional(
            columns[2].number_input(
                "E2E target (ms, 0: none)",
                min_value=0.0,
                value=0.0,
                step=1000.0,
                key="whatif-slo-e2e",
            )
        ),
    }


def _inputs(datasets: dict[str, int], forecasts: dict[int, str]) -> Inputs | None:
    """The run the widgets describe; None (with the reason shown) when they describe none."""
    demand, estimate = _demand_inputs(datasets, forecasts)
    serving = _serving_inputs()
    fleet: FleetSettings | None = None
    with common.shown_errors():
        fleet = replace(_fleet_inputs(), api=_api_inputs(serving.model))
    roles = _role_inputs(serving)
    st.subheader("Targets and prices")
    slo_ms = _slo_inputs()
    prices = _price_inputs(serving.gpu, serving.tp)
    columns = st.columns(4)
    seed = columns[0].number_input("Seed", min_value=0, value=0, step=1, key="whatif-seed")
    label = columns[1].text_input(
        "Label of this run", value="", placeholder="automatic", key="whatif-label"
    )
    if demand is None or fleet is None:
        return None
    slo = SLO(**{SLO_FIELDS[k]: v / 1e3 if v is not None else None for k, v in slo_ms.items()})
    whatif = WhatIf(
        serving=serving,
        demand=demand,
        fleet=fleet,
        prices=prices,
        slo=slo,
        seed=int(seed),
        max_requests=DEFAULT_MAX_REQUESTS,
        price_names=PRICE_NAMES,
        disaggregation=roles,
    )
    return Inputs(whatif, slo_ms, label.strip(), estimate)


def _estimate(inputs: Inputs) -> None:
    """About how many requests the run simulates, and how long it takes."""
    if inputs.estimate is None:
        return
    try:
        size = fleet_size(build_fleet(inputs.whatif.fleet, inputs.whatif.serving.tp))
    except PlannerError:
        return  # the run says why when it is asked for
    seconds = estimated_seconds(inputs.estimate, size)
    st.caption(
        f"About {inputs.estimate:,.0f} requests through up to {size:,} replicas: about "
        f"{max(seconds, 1):,.0f} s to simulate. Runs over {DEFAULT_MAX_REQUESTS:,} requests "
        f"(or fleets over {DEFAULT_MAX_REQUESTS // REQUESTS_PER_REPLICA:,} replicas) are "
        "refused, as `planner simulate` refuses them."
    )


# --- running --------------------------------------------------------------------------------------


def _fleet_text(fleet: FleetSettings) -> str:
    if fleet.autoscale:
        return f"autoscale {fleet.min_replicas}-{fleet.max_replicas}"
    if fleet.schedule is not None:
        return f"schedule of up to {max(fleet.schedule)}"
    return " + ".join(f"{n} {name}" for name, n in fleet.purchase.items()) or "no replicas"


def _arrivals_text(demand: DemandSource) -> str:
    if demand.dataset is not None:
        return f"{demand.dataset} x {demand.load_scale:g}"
    return (demand.rates_label or "rate curve").split(" at q", 1)[0]


def _auto_label(whatif: WhatIf, number: int) -> str:
    s = whatif.serving
    return (
        f"#{number} {s.model} {s.precision} on {s.tp}x{s.gpu}, {_fleet_text(whatif.fleet)}, "
        f"{_arrivals_text(whatif.demand)}"
    )


def _settings(whatif: WhatIf) -> dict[str, str]:
    """A run's settings in words, to tell runs apart."""
    s, f, d = whatif.serving, whatif.fleet, whatif.demand
    arrivals = (
        f"dataset {d.dataset} x {d.load_scale:g}"
        if d.dataset is not None
        else f"{d.rates_label}, lengths from {d.tokens_from}"
    )
    return {
        "arrivals": arrivals,
        "replica": f"{s.model} {s.precision} on {s.tp} x {s.gpu} ({s.engine})",
        "max sequences": "engine default" if s.max_seqs is None else f"{s.max_seqs:,}",
        "chunked prefill": "on" if s.chunked_prefill else "off",
        "prefix cache": f"on, hit rate {s.prefix_hit_rate:g}" if s.prefix_caching else "off",
        "fleet": _fleet_text(f),
        "spot interruptions": f"{f.spot_interruptions_per_hour:g} per replica-hour",
        "response cache": f"{f.response_cache_hit_rate:g}",
        "router": f.router,
        "API behind the fleet": _api_text(f.api),
        "prices ($ per replica-hour)": ", ".join(
            f"{name} {common.unit_price(price)}" for name, price in whatif.prices.given().items()
        )
        or "none",
        "SLO targets": ", ".join(
            f"{metric.upper()} {getattr(whatif.slo, field) * 1e3:,.0f} ms"
            for metric, field in SLO_FIELDS.items()
            if getattr(whatif.slo, field) is not None
        )
        or "none",
        "seed": str(whatif.seed),
    }


def _api_text(api: ApiOverflow | None) -> str:
    if api is None:
        return "none"
    limits = [f"{v:,.0f} {unit}/min" for v, unit in ((api.rpm, "req"), (api.tpm, "tok")) if v]
    return (
        f"at {api.queue} per replica, TTFT {api.ttft_s * 1e3:,.0f} ms, TPOT "
        f"{api.tpot_s * 1e3:,.1f} ms, limit {', '.join(limits) or 'none'}, "
        f"{api.price or 'not priced'}"
    )


def _runs() -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = st.session_state.setdefault(RUNS_KEY, [])
    return runs


def _keep(run: dict[str, Any]) -> None:
    runs = _runs()
    runs.append(run)
    while len(runs) > KEPT_RUNS:  # the oldest run's per-request file goes with it
        shutil.rmtree(runs.pop(0)["folder"], ignore_errors=True)


def _run(inputs: Inputs) -> None:
    whatif = inputs.whatif
    with common.shown_errors():
        bar = st.progress(0.0, text="loading the requests")

        def progress(done: int, total: int) -> None:
            text = (
                f"simulated {done:,} of {total:,} requests"
                if done
                else f"simulating {total:,} requests"
            )
            bar.progress(min(done / max(total, 1), 1.0), text=text)

        folder = Path(tempfile.mkdtemp(prefix="planner-whatif-"))
        try:
            request = SimulateRequest(whatif, requests_out=folder / "requests.parquet")
            done = simulate(request, common.session, progress=progress)
            result = done.simulation
            cdfs = request_cdfs(
                read_requests(folder / "requests.parquet", ["ttft_s", "tpot_s", "e2e_s"])
            )
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            bar.empty()
        number = max((r["number"] for r in _runs()), default=0) + 1
        label = inputs.label or _auto_label(whatif, number)
        if any(r["label"] == label for r in _runs()):
            label = f"{label} (#{number})"
        _keep(
            {
                "number": number,
                "label": label,
                "whatif": whatif,
                "settings": _settings(whatif),
                "slo_ms": inputs.slo_ms,
                "result": result.to_dict(),
                "timeline": result.timeline,
                "start": done.start,
                "cdfs": cdfs,
                "folder": str(folder),
            }
        )


# --- results --------------------------------------------------------------------------------------


def _usd(value: float | None) -> str:
    """A simulated run's cost: a run of hours keeps its cents ($0.42); monthly amounts are
    whole dollars elsewhere (``common.money``)."""
    return common.MISSING if value is None else f"${value:,.2f}"


def _share(value: float | None) -> str:
    return common.MISSING if value is None else f"{value:.1%}"


def _cdf_chart(
    traces: list[tuple[str, pd.DataFrame, str]], metric: str, target_ms: float | None, log: bool
) -> go.Figure:
    fig = go.Figure()
    for name, cdf, colour in traces:
        part = cdf[cdf["metric"] == metric]
        fig.add_scatter(x=part["ms"], y=part["share"], name=name, mode="lines", line_color=colour)
    if target_ms is not None:
        common.slo_line(fig, target_ms, f"SLO {target_ms:,.0f} ms", log_x=log)
    label = LATENCIES[metric]
    fig.update_layout(height=360, title=f"{label} CDF")
    if log:
        shown = [cdf.loc[cdf["metric"] == metric, "ms"] for _, cdf, _ in traces]
        values = [*pd.concat(shown), *([target_ms] if target_ms is not None else [])]
        common.log_axis(fig, "x", values, title_text=f"{label} (ms)")
    else:
        fig.update_xaxes(title_text=f"{label} (ms)", type="linear")
    fig.update_yaxes(title_text="share of requests", range=[0, 1.01], tickformat=".0%")
    return fig


def _timeline_charts(run: dict[str, Any]) -> None:
    timeline: pd.DataFrame = run["timeline"]
    if timeline.empty:
        return
    start: datetime = run["start"]
    when = [start + timedelta(seconds=float(t)) for t in timeline["t_s"]]
    purchases = [c for c in timeline.columns if c in common.PURCHASE_COLOURS]
    replicas = go.Figure()
    for name in purchases:
        replicas.add_scatter(
            x=when,
            y=timeline[name],
            name=name,
            mode="lines",
            stackgroup="replicas",
            line_color=common.PURCHASE_COLOURS[name],
        )
    replicas.add_scatter(
        x=when, y=timeline["busy_replicas"], name="busy", mode="lines", line={"dash": "dot"}
    )
    replicas.update_layout(height=300, title="Replicas up (by purchase) and busy")
    replicas.update_xaxes(title_text="time (UTC)")
    replicas.update_yaxes(title_text="replicas")
    queue = go.Figure()
    queue.add_scatter(x=when, y=timeline["queued"], name="queued", mode="lines")
    queue.add_scatter(x=when, y=timeline["running"], name="running", mode="lines")
    queue.update_layout(height=300, title="Requests queued and running")
    queue.update_xaxes(title_text="time (UTC)")
    queue.update_yaxes(title_text="requests queued")
    busy = go.Figure()
    busy.add_scatter(x=when, y=timeline["utilization"], name="busy share", mode="lines")
    busy.update_layout(height=300, title="Busy share of the replicas up")
    busy.update_xaxes(title_text="time (UTC)")
    busy.update_yaxes(title_text="busy share", tickformat=".0%", range=[0, 1.05])
    left, middle, right = st.columns(3)
    with left:
        common.chart(replicas, key="whatif-replicas-chart")
    with middle:
        common.chart(queue, key="whatif-queue-chart")
    with right:
        common.chart(busy, key="whatif-busy-chart")


def _requests_csv(folder: str) -> bytes:
    """The per-request results as CSV, made when the analyst asks for them."""
    frame = read_requests(Path(folder) / "requests.parquet")
    return csv_bytes(frame)


def _show(run: dict[str, Any]) -> None:
    result = run["result"]
    overall = result["summary"]["all"]
    serving = result["serving"]
    hours = result["simulated_s"] / 3600
    st.markdown(
        f"**{run['label']}**: {serving['model']} {serving['precision']} on {serving['tp']} x "
        f"{serving['gpu']} per replica, {serving['engine']} (profile {serving['profile']}), "
        f"{result['requests']:,} requests over {hours:,.2f} h simulated in "
        f"{result['wall_s']:,.1f} s"
    )
    cost = result["cost"]
    columns = st.columns(5)
    columns[0].metric("SLO attainment", _share(overall["slo_attainment"]))
    columns[1].metric("Finished / rejected", f"{overall['finished']:,} / {overall['rejected']:,}")
    columns[2].metric("Cost", _usd(cost["total"] if cost else None))
    columns[3].metric(
        "$ per hour", common.unit_price(cost["total"] / hours if cost and hours > 0 else None)
    )
    columns[4].metric("Peak replicas", f"{result['fleet']['peak_replicas']:,}")
    _show_roles(result)
    _show_api(result)
    for note in result["notes"]:
        st.info(note, icon=":material/info:")
    table = _percentiles(result["summary"])
    left, right = st.columns(2)
    with left:
        common.table(
            table,
            key="whatif-percentiles",
            column_config={
                c: st.column_config.NumberColumn(format="%.1f") for c in table.columns[1:]
            },
        )
        common.download_table(table, "whatif-percentiles", key="whatif-percentiles-download")
    with right:
        costs = cost_table(cost, hours)
        if costs.empty:
            st.caption("Not priced: choose prices to see the cost.")
        else:
            common.table(
                costs,
                key="whatif-cost",
                column_config={
                    "GPU-hours": st.column_config.NumberColumn(format="%.2f"),
                    "$ per GPU-hour": st.column_config.NumberColumn(format="$%.4f"),
                    "cost ($)": st.column_config.NumberColumn(format="$%.2f"),
                    "$ per hour": st.column_config.NumberColumn(format="$%.2f"),
                },
            )
            common.download_table(costs, "whatif-cost", key="whatif-cost-download")
    log = st.toggle("Log-scale latency axis", value=True, key="whatif-log")
    tabs = st.tabs([f"{label} CDF" for label in LATENCIES.values()])
    for tab, metric in zip(tabs, LATENCIES, strict=True):
        with tab:
            fig = _cdf_chart(
                [(run["label"], run["cdfs"], METRIC_COLOURS[metric])],
                metric,
                run["slo_ms"].get(metric),
                log,
            )
            common.chart(fig, key=f"whatif-cdf-{metric}")
    _timeline_charts(run)
    _downloads(run)


def _downloads(run: dict[str, Any]) -> None:
    """The run's summary (JSON), per-request results and timeline (CSV)."""
    result = run["result"]
    st.markdown("**Downloads**")
    downloads = st.columns(3)
    with downloads[0]:
        st.caption("Summary")
        common.download_json(result, f"whatif-{run['number']}-summary", key="whatif-summary-json")
    with downloads[1]:
        st.caption("Per-request results")
        st.download_button(
            "CSV",
            lambda: _requests_csv(run["folder"]),
            file_name=f"whatif-{run['number']}-requests.csv",
            mime="text/csv",
            key="whatif-requests-csv",
            icon=":material/download:",
        )
    with downloads[2]:
        st.caption("Timeline")
        common.download_table(
            run["timeline"], f"whatif-{run['number']}-timeline", key="whatif-timeline"
        )


def _show_roles(result: dict[str, Any]) -> None:
    """A disaggregated run: each pool, the KV transfer and the wait for decode room."""
    d = result.get("disaggregation")
    if not d:
        return
    serving = result["serving"]
    t, share = d["transfer_s"], d["transfer_share_of_ttft"]
    st.markdown(
        f"**Disaggregated**: the KV cache over **{d['link']}** ({d['link_transport']}), "
        f"first token from the {d['first_token']} side."
    )
    columns = st.columns(4)
    columns[0].metric("KV transfer P99", _ms_text(t["p99"]))
    columns[1].metric("Transfer share of TTFT (median)", _share(share["p50"]))
    columns[2].metric("Waiting for a free link P99", _ms_text(d["transfer_wait_s"]["p99"]))
    columns[3].metric(
        "Decode wait P99",
        _ms_text(d["decode_wait_s"]["p99"]),
        help="From the KV cache's arrival to the end of the first decode step: more than a "
        "step means the request was held for room in the decode pool (back-pressure).",
    )
    common.table(
        [
            {
                "role": pool["role"],
                "replicas": pool["fleet"]["launched"],
                "GPUs each": serving[pool["role"]]["tp"],
                "GPU": serving[pool["role"]]["gpu"],
                "max sequences": serving[pool["role"]]["max_seqs"],
                "queued at most": pool["queued_peak"],
                "cost": (pool["cost"] or {}).get("total"),
            }
            for pool in d["pools"]
        ],
        hide_index=True,
        key="whatif-roles",
        column_config={
            "cost": st.column_config.NumberColumn(format="dollar"),
            "queued at most": st.column_config.NumberColumn(format="%.1f"),
        },
    )


def _show_api(result: dict[str, Any]) -> None:
    """The API behind the fleet: its share of the requests and tokens, what its rate limit
    sent back, and its cost beside the fleet's."""
    api = result["summary"].get("api")
    if not api:
        return
    st.markdown(
        f"**API behind the fleet** (at {api['queue']:,} outstanding per replica): its requests "
        "count in the percentiles below."
    )
    columns = st.columns(5)
    columns[0].metric("API share of requests", _share(api["share"]))
    columns[1].metric("API requests", f"{api['requests']:,}")
    columns[2].metric(
        "API tokens (in / out)", f"{api['input_tokens']:,} / {api['output_tokens']:,}"
    )
    columns[3].metric(
        "Sent back by its rate limit",
        f"{api['rate_limited']:,}",
        help="Arrivals the API's rate limit turned away: they waited on the replicas.",
    )
    price = api["price"]
    columns[4].metric(
        "API cost",
        _usd(api["cost_usd"]),
        help=None
        if price is None
        else f"{price['provider']} {price['offer']}, {price['source_date']}",
    )


def _ms_text(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def _percentiles(summary: dict[str, Any]) -> pd.DataFrame:
    """The percentile table, with each P99's interval (``planner simulate``'s, at its
    confidence) as two more columns where the run has one."""
    table = percentile_table(summary)
    overall = summary["all"]
    bounds = [(overall[metric].get("interval") or {}).get("p99") for metric in LATENCIES]
    if not any(bounds):
        return table
    level = next(b for b in bounds if b)["confidence"]
    for side in ("low", "high"):
        table[f"P99 {level:.0%} {side} (ms)"] = [
            None if b is None else b[side] * 1e3 for b in bounds
        ]
    return table


def _compare(runs: list[dict[str, Any]]) -> None:
    st.subheader("Compare two runs")
    labels = [r["label"] for r in runs]
    left, right = st.columns(2)
    first = left.selectbox("Run A", labels, index=len(labels) - 2, key="whatif-compare-a")
    second = right.selectbox("Run B", labels, index=len(labels) - 1, key="whatif-compare-b")
    a = next(r for r in runs if r["label"] == first)
    b = next(r for r in runs if r["label"] == second)
    numbers = pd.DataFrame(
        {
            "": list(headline(a["result"])),
            "A": headline(a["result"]).values(),
            "B": headline(b["result"]).values(),
        }
    )
    numbers["B - A"] = pd.to_numeric(numbers["B"], errors="coerce") - pd.to_numeric(
        numbers["A"], errors="coerce"
    )
    settings = pd.DataFrame(
        {"": list(a["settings"]), "A": a["settings"].values(), "B": b["settings"].values()}
    )
    one, two = st.columns(2)
    with one:
        common.table(
            numbers,
            key="whatif-compare-numbers",
            column_config={c: st.column_config.NumberColumn(format="%.4g") for c in "AB"}
            | {"B - A": st.column_config.NumberColumn(format="%+.4g")},
        )
        common.download_table(numbers, "whatif-compare", key="whatif-compare-download")
    with two:
        common.table(settings, key="whatif-compare-settings")
    log = st.toggle("Log-scale latency axis", value=True, key="whatif-compare-log")
    tabs = st.tabs([f"{label} CDFs" for label in LATENCIES.values()])
    for tab, metric in zip(tabs, LATENCIES, strict=True):
        with tab:
            traces = [
                (f"A: {a['label']}", a["cdfs"], RUN_COLOURS[0]),
                (f"B: {b['label']}", b["cdfs"], RUN_COLOURS[1]),
            ]
            fig = _cdf_chart(traces, metric, a["slo_ms"].get(metric), log)
            common.chart(fig, key=f"whatif-compare-cdf-{metric}")


# --- the page -------------------------------------------------------------------------------------

st.title("What-if simulator")
st.caption(
    "A fleet serving a request stream, simulated request by request: the run `planner simulate` "
    "makes for the same settings."
)
with common.shown_errors():
    datasets = _datasets(common.store_url(), common.version())
    forecasts = _forecasts(common.store_url(), common.version())
    if not datasets:
        common.empty_store_hint("datasets")
    else:
        inputs = _inputs(datasets, forecasts)
        if inputs is not None:
            _estimate(inputs)
        if st.button("Run simulation", type="primary", key="whatif-run", disabled=inputs is None):
            assert inputs is not None
            _run(inputs)
    runs = _runs()
    if runs:
        st.divider()
        st.header("Results")
        labels = [r["label"] for r in runs]
        shown_label = labels[-1]
        if len(runs) > 1:
            shown_label = st.selectbox("Run", labels, index=len(labels) - 1, key="whatif-show")
        _show(next(r for r in runs if r["label"] == shown_label))
        if len(runs) > 1:
            st.divider()
            _compare(runs)
