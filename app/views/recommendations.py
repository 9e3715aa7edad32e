"""Recommendations: the cheapest fleet that meets the P99 targets, verified by simulation, with
the commitment plan behind it; stored recommendations reopened.

A search runs in the background (``planner.usecases.recommend_background``), owned by one
registry per server: the analyst may visit other pages while it runs; it is stored when it ends
by the same use case as ``planner recommend`` (``planner.usecases.recommend``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd
import streamlit as st

from app import common, signin
from app.deploy import deploy_downloads
from planner.common.text import shown
from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.latency.uncertainty import DEFAULT_CONFIDENCE
from planner.recommend import tables
from planner.recommend.disagg import architecture_sentence
from planner.recommend.engine import why_no_fleet
from planner.recommend.inputs import (
    DEFAULT_PRECISIONS,
    DISAGGREGATION,
    Constraints,
    SearchOptions,
)
from planner.recommend.limits import LimitNames
from planner.recommend.mix import DEFAULT_SIZE_BUCKETS
from planner.recommend.plot import (
    api_vs_self_hosted,
    cost_vs_p99,
    fleet_by_pool,
    fleet_by_purchase,
)
from planner.simulate.metrics import SLO
from planner.usecases.recommend import (
    DemandChoice,
    RecommendRequest,
    SearchChoices,
    search_choices,
)
from planner.usecases.recommend_background import SearchRegistry, SearchStatus

POLL_S = 1.0  # how often a running search's progress is redrawn
DEFAULT_MODEL = "llama-3.1-8b"
EVERY_MODEL = "every model of the log"  # a fleet: each model of the dataset on its own pools
METRICS = {"ttft": "P99 TTFT", "tpot": "P99 TPOT", "e2e": "P99 E2E"}
# how a refusal names the page's inputs (the CLI's options otherwise)
PAGE_NAMES = LimitNames(
    load_scale="the load scale",
    verify_hours="the verified hours",
    max_requests="the request limit",
    window="run it from the CLI on a window of the dataset (planner recommend --start/--end)",
)
JOB_KEY = "rec-job"  # this session's running search
OUTCOME_KEY = "rec-outcome"  # how this session's last search ended
WATCHED_KEY = "rec-watched"  # searches the progress panel shows


@st.cache_resource(show_spinner=False)
def _searches() -> SearchRegistry:
    """The server's searches: they outlive a page's script run and a browser session."""
    return SearchRegistry()


@st.cache_data(show_spinner=False)
def _choices(url: str, version: str) -> SearchChoices:
    """Datasets, stored forecasts that carry a demand curve, and the prices' providers and GPUs
    (the catalog's GPUs before any are loaded: a search loads the bundled list prices first)."""
    found = search_choices(common.session)
    if not found.providers:
        return replace(found, providers=["aws", "azure", "gcp"], gpus=load_catalog().gpus.names())
    return found


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


# ---------------------------------------------------------------------------------------------
# Starting a search, and its progress


def _search_form(url: str, version: str) -> None:
    choices = _choices(url, version)
    if not choices.datasets:
        common.empty_store_hint("datasets (a search needs one for the load or its request lengths)")
        return
    _demand_inputs(choices.datasets, choices.forecasts)
    _target_inputs(load_catalog().models.names())
    _fleet_inputs()
    _constraint_inputs(choices.providers, choices.gpus, load_catalog().precisions.names())
    _effort_inputs()
    if st.button("Find the cheapest fleet", key="rec-run", type="primary"):
        with common.shown_errors():
            spec = _spec()
            if spec is not None:
                job = _searches().start(spec, url)
                st.session_state[JOB_KEY] = job.job_id
                st.session_state.pop(OUTCOME_KEY, None)


def _demand_inputs(datasets: list[str], forecasts: dict[int, str]) -> None:
    st.markdown("**Demand**")
    left, middle, right = st.columns([2, 2, 1])
    forecast = left.selectbox(
        "Stored forecast",
        [None, *forecasts],
        format_func=lambda i: (
            "none: plan for the dataset's logged requests" if i is None else forecasts[i]
        ),
        key="rec-forecast",
        help="Plan for a forecast's demand curve; the dataset then gives the request lengths.",
    )
    middle.selectbox(
        "Dataset",
        datasets,
        key="rec-dataset",
        help="Its requests are replayed; with a forecast, its request lengths are drawn.",
    )
    right.number_input(
        "Load scale",
        min_value=0.0,
        value=1.0,
        step=0.1,
        format="%g",
        key="rec-load-scale",
        help="Every hour's load multiplied by this (1.5: 50% more).",
    )
    st.caption(
        "Demand: the forecast's demand curve, request lengths from the dataset"
        if forecast is not None
        else "Demand: the dataset's logged requests, replayed"
    )


def _target_inputs(models: list[str]) -> None:
    st.markdown("**Model and P99 targets** (leave a target empty for none)")
    targets = st.columns(5)
    choices = [EVERY_MODEL, *models]
    targets[0].selectbox(
        "Model",
        choices,
        index=choices.index(DEFAULT_MODEL) if DEFAULT_MODEL in choices else 0,
        key="rec-model",
        help="A log of several models: one model plans only its requests; every model plans "
        "a fleet, each model on its own pools with the targets below (per model with the "
        "per-model targets).",
    )
    targets[1].number_input(
        "P99 TTFT (ms)", min_value=0.0, value=2000.0, step=100.0, format="%.0f", key="rec-ttft"
    )
    targets[2].number_input(
        "P99 TPOT (ms)", min_value=0.0, value=200.0, step=10.0, format="%.0f", key="rec-tpot"
    )
    targets[3].number_input(
        "P99 E2E (s)", min_value=0.0, value=None, step=1.0, format="%g", key="rec-e2e"
    )
    targets[4].number_input(
        "Min. SLO attainment",
        min_value=0.0,
        max_value=1.0,
        value=None,
        format="%g",
        key="rec-attainment",
        help="Share of requests that must meet every target, e.g. 0.99.",
    )


def _fleet_inputs() -> None:
    """How a log of several models becomes a fleet (the CLI's --size-buckets, --slo MODEL:...,
    --model-map, --unmapped and --colocate)."""
    with st.expander("Fleets: several models, request sizes across GPU types, co-location"):
        cols = st.columns(2)
        cols[0].text_input(
            "Split request sizes at (input tokens)",
            value="",
            key="rec-size-buckets",
            placeholder="512,2048,8192",
            help="Each model's requests split by prompt length, each size on the GPU type that "
            "serves it cheapest (empty: 512,2048,8192 for every model of a log, one pool for "
            "one model; none: one pool per model).",
        )
        cols[1].text_input(
            "Targets per model",
            value="",
            key="rec-model-slos",
            placeholder="llama-3.1-70b:ttft=4s,tpot=100ms",
            help="MODEL:ttft=..,tpot=..,e2e=.. items separated by ';', over the targets above.",
        )
        more = st.columns(3)
        more[0].text_input(
            "Map log model names",
            value="",
            key="rec-model-map",
            placeholder="our-70b=llama-3.1-70b",
            help="LOGNAME=CATALOG pairs, comma-separated, for names the catalog does not know.",
        )
        more[1].selectbox(
            "Log names the catalog lacks",
            ["error", "skip"],
            format_func=lambda v: "stop and list them" if v == "error" else "leave them out",
            key="rec-unmapped",
        )
        more[2].checkbox(
            "Co-locate quiet models",
            value=True,
            key="rec-colocate",
            help="Small models on one instance each may share one (their memory split, their "
            "interference simulated).",
        )
        st.text_input(
            "Substitutes for proprietary models",
            value="",
            key="rec-substitutes",
            placeholder="gpt-4o-mini=llama-3.1-8b",
            help="LOGNAME=CATALOG pairs, comma-separated: serve the catalog model in place of "
            "the log's (the CLI's --substitute); the API is still priced by the log's name, "
            "and the catalog model's quality against it is your call. Choose the catalog model "
            "above to compare it with the API.",
        )


def _size_buckets(text: str, every_model: bool) -> tuple[int, ...] | None:
    """The form's size split: boundaries, none, or the default for the number of models."""
    text = text.strip().lower()
    if not text:
        return DEFAULT_SIZE_BUCKETS if every_model else None
    if text == "none":
        return () if every_model else None
    try:
        bounds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(
            f"Split request sizes at {shown(text)}: expected increasing whole numbers of "
            "input tokens, e.g. 512,2048,8192, or none"
        ) from None
    if list(bounds) != sorted(set(bounds)) or min(bounds, default=1) < 1:
        raise UsageError(
            f"Split request sizes at {shown(text)}: expected increasing boundaries above 0"
        )
    return bounds


def _constraint_inputs(providers: list[str], gpus: list[str], precisions: list[str]) -> None:
    st.markdown("**Constraints** (empty: any)")
    cols = st.columns(3)
    cols[0].multiselect("Providers", providers, key="rec-providers")
    cols[1].multiselect("GPUs", gpus, key="rec-gpus")
    cols[2].multiselect(
        "Precisions",
        precisions,
        default=[p for p in DEFAULT_PRECISIONS if p in precisions],
        key="rec-precisions",
    )
    cols = st.columns(3)
    cols[0].number_input(
        "Max. spot share",
        min_value=0.0,
        max_value=1.0,
        value=0.0,
        step=0.1,
        key="rec-spot-share",
        help="Share of the load above commitments that may run on spot.",
    )
    cols[1].number_input(
        "Budget ($ per month)", min_value=0.0, value=None, step=100.0, key="rec-budget"
    )
    cols[2].number_input(
        "Min. replicas", min_value=0, max_value=10_000, value=1, key="rec-min-replicas"
    )


def _effort_inputs() -> None:
    st.markdown("**Search effort**")
    effort = st.columns(7)
    effort[0].number_input(
        "Candidates to simulate",
        min_value=1,
        max_value=500,
        value=20,
        key="rec-verify-top",
        help="The cheapest screened candidates verified by simulation.",
    )
    effort[1].number_input(
        "Tightening steps",
        min_value=0,
        max_value=10,
        value=3,
        key="rec-tighten",
        help="Tries to serve the winner's load on fewer replicas.",
    )
    effort[2].checkbox(
        "Compare GPUs",
        value=True,
        key="rec-compare-gpus",
        help="Also simulate the cheapest candidate of every other GPU type.",
    )
    effort[3].checkbox(
        "Growth check",
        value=True,
        key="rec-growth-check",
        help="Simulate the winner's peak hour at +10% to +100% load.",
    )
    effort[4].number_input(
        "Confidence",
        min_value=0.0,
        max_value=0.99,
        value=DEFAULT_CONFIDENCE,
        step=0.05,
        key="rec-confidence",
        help="Size the fleet so the P99 targets hold at the upper end of this confidence's "
        "interval (the model's held-out error and the simulation's sampling error); 0: on the "
        "point estimates.",
    )
    effort[5].selectbox(
        "Prefill/decode apart",
        DISAGGREGATION,
        key="rec-disaggregation",
        help="Disaggregated serving: prefill and decode on pools of their own, the KV cache "
        "moved between them. auto: searched beside aggregated replicas; only; off.",
    )
    effort[6].selectbox(
        "Per-token APIs",
        ("allow", "never", "only"),
        key="rec-api",
        help="allow: a model's traffic may go to its cheapest API offer, all of it or the "
        "peaks above a committed base fleet, where that is cheaper (the break-even is shown); "
        "never: GPUs only; only: the API's bill.",
    )


def _spec() -> RecommendRequest | None:
    """The search the form describes; None (with a message) for an input it cannot take."""
    state = st.session_state
    targets = {k: state[f"rec-{k}"] for k in ("ttft", "tpot", "e2e")}
    if not any(targets.values()):
        st.error("Give at least one P99 target (TTFT, TPOT or E2E) above 0.")
        return None
    budget = state["rec-budget"]
    if budget is not None and budget <= 0:
        st.error("Budget: give a positive number of dollars a month, or leave it empty.")
        return None
    if not state["rec-precisions"]:
        st.error("Precisions: allow at least one.")
        return None
    forecast = state["rec-forecast"]
    dataset = state["rec-dataset"]
    spot_share = float(state["rec-spot-share"])
    every_model = state["rec-model"] == EVERY_MODEL
    if every_model and forecast is not None:
        st.error(
            "Every model of the log is planned from the dataset's requests: choose no forecast, "
            "or one model (a forecast is of one model)."
        )
        return None
    model_slos = tuple(
        item.strip() for item in str(state.get("rec-model-slos") or "").split(";") if item.strip()
    )
    return RecommendRequest(
        demand=DemandChoice(
            dataset=dataset if forecast is None else None,
            forecast_id=forecast,
            tokens_from=dataset if forecast is not None else None,
            load_scale=float(state["rec-load-scale"]),
        ),
        slo=SLO(
            ttft_s=targets["ttft"] / 1e3 if targets["ttft"] else None,
            tpot_s=targets["tpot"] / 1e3 if targets["tpot"] else None,
            e2e_s=targets["e2e"] or None,
        ),
        min_attainment=state["rec-attainment"] or None,
        class_slos=model_slos,
        all_models=every_model,
        model_map=tuple(p for p in str(state.get("rec-model-map") or "").split(",") if p.strip()),
        unmapped=str(state.get("rec-unmapped") or "error"),
        size_buckets=_size_buckets(str(state.get("rec-size-buckets") or ""), every_model),
        colocate=bool(state.get("rec-colocate", True)),
        substitutes=tuple(
            p for p in str(state.get("rec-substitutes") or "").split(",") if p.strip()
        ),
        constraints=Constraints(
            model="" if every_model else state["rec-model"],
            providers=tuple(state["rec-providers"]),
            gpus=tuple(state["rec-gpus"]),
            precisions=tuple(state["rec-precisions"]),
            max_spot_share=spot_share,
            budget_usd_per_month=budget,
            min_replicas=int(state["rec-min-replicas"]),
        ),
        options=SearchOptions(
            verify_top=int(state["rec-verify-top"]),
            tighten_steps=int(state["rec-tighten"]),
            compare_gpus=bool(state["rec-compare-gpus"]),
            growth_check=bool(state["rec-growth-check"]),
            confidence=float(state["rec-confidence"]) or None,
            disaggregation=str(state.get("rec-disaggregation") or "auto"),
            api=str(state.get("rec-api") or "allow"),
        ),
        names=PAGE_NAMES,
    )


def _collect_finished() -> None:
    """This session's search, once ended: its stored recommendation is selected to be shown,
    and how it ended is kept to be said (runs before the store is read: a search that ends
    now is in this run's list)."""
    job_id = st.session_state.get(JOB_KEY)
    if job_id is None:
        return
    job = _searches().get(job_id)
    if job is None:  # the server restarted (the registry is gone)
        st.session_state.pop(JOB_KEY)
        return
    status = job.status()
    if not status.finished:
        return
    st.session_state.pop(JOB_KEY)
    st.session_state[OUTCOME_KEY] = status
    if status.stored_id is not None:
        st.session_state["rec-stored"] = status.stored_id


@st.fragment(run_every=POLL_S)
def _progress() -> None:
    """Running searches, redrawn every second; when one of them ends the whole page reruns
    (its result is then in the store)."""
    # each person sees their own searches (everyone's results are in the store)
    statuses = {s.job_id: s for s in _searches().statuses(owner=signin.run_actor().name)}
    watched = st.session_state.get(WATCHED_KEY, [])
    if any(statuses[i].finished for i in watched if i in statuses):
        st.rerun()
    running = [s for s in statuses.values() if not s.finished]
    st.session_state[WATCHED_KEY] = [s.job_id for s in running]
    mine = st.session_state.get(JOB_KEY)
    for status in sorted(running, key=lambda s: s.job_id != mine):
        with st.container(border=True):
            who = "Your search" if status.job_id == mine else "Another session's search"
            st.markdown(
                f"**{who}: {status.label}**: {status.stage}, {status.elapsed_s:,.0f} s so far. "
                "It keeps running while you visit other pages, and is stored when it ends."
            )
            for stage in status.stages:
                share = stage.done / stage.total if stage.total else 1.0
                st.progress(
                    min(1.0, share), text=f"{stage.name}: {stage.done:,} of {stage.total:,}"
                )
            if status.job_id == mine and st.button(
                "Stop the search", key=f"rec-stop-{status.job_id}", icon=":material/stop:"
            ):
                job = _searches().get(status.job_id)
                if job is not None:
                    job.stop()


def _say_outcome() -> dict[str, Any] | None:
    """How this session's last search ended; returns its result when it is not in the store
    (the store refused it): shown from memory then."""
    status: SearchStatus | None = st.session_state.get(OUTCOME_KEY)
    if status is None:
        return None
    if status.state == "failed":
        st.error(f"The search failed: {status.error}", icon=":material/error:")
    elif status.state == "cancelled":
        st.info("The search was stopped; nothing was stored.", icon=":material/info:")
    elif status.result is not None:
        took = f"in {status.elapsed_s:,.0f} s"
        no_fleet = status.result.get("winner") is None and not status.result.get("api_only")
        if status.stored_id is not None and no_fleet:
            st.warning(
                f"Search finished {took}: no configuration met the targets (why: below). "
                f"Stored as recommendation #{status.stored_id}.",
                icon=":material/warning:",
            )
        elif status.stored_id is not None:
            st.success(
                f"Search finished {took}: stored as recommendation #{status.stored_id}, "
                "shown below.",
                icon=":material/check_circle:",
            )
        else:
            st.error(
                f"Search finished {took} but was not stored: {status.not_stored}. It is shown "
                "below; download its JSON to keep it.",
                icon=":material/error:",
            )
            return status.result
    return None


# ---------------------------------------------------------------------------------------------
# A result


def _show_result(data: dict[str, Any], name: str, stored_id: int | None = None) -> None:
    try:
        if tables.is_fleet(data):
            _show_fleet(data, name)
            deploy_downloads(data, stored_id)
            return
        _winner(data)
        _confidence(data)
        _alternatives(data, name)
        _pareto(data)
        _rejections(data, name)
        _plan(data, name)
        _api(data)
        _fleet(data, name)
        _notes(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        st.error(
            f"This recommendation is stored in a form this page cannot read "
            f"({type(exc).__name__}: {exc}); its JSON is below as stored.",
            icon=":material/error:",
        )
    common.download_json(data, name, key="rec-json")
    deploy_downloads(data, stored_id)


def _winner(data: dict[str, Any]) -> None:
    d = data["demand"]
    st.info(common.planned_load(d), icon=":material/scale:")
    st.caption(
        f"Demand: {d['source']}: {d['hours']:,} h; mean tokens in/out "
        f"{d['mean_input_tokens']:,.0f}/{d['mean_output_tokens']:,.0f}"
    )
    winner, plan = data.get("winner"), data.get("plan")
    st.subheader("Recommended fleet")
    if data.get("api_only"):  # a proprietary model without a substitute (the notes say how)
        st.info("No self-hosted fleet: only per-token APIs serve this model; their bill is below.")
        return
    if winner is None or plan is None:
        st.error(why_no_fleet(data["rejected"]), icon=":material/block:")
        return
    chosen = plan["chosen"]
    layout = (
        f"**disaggregated**: {common.plural(winner['prefill_replicas_peak'], 'prefill replica')}"
        f" of TP {winner['prefill_tp']} and "
        f"{common.plural(winner['decode_replicas_peak'], 'decode replica')} of TP "
        f"{winner['decode_tp']} at peak, up to {winner['max_seqs']} sequences per decode replica"
        if winner.get("architecture") == "disaggregated"
        else f"TP {winner['tp']}, up to {winner['max_seqs']} sequences per replica, chunked "
        f"prefill {'on' if winner['chunked_prefill'] else 'off'}; "
        f"{common.plural(winner['peak_replicas'], 'replica')} at peak"
    )
    st.markdown(
        f"**{winner['provider']}/{winner['region']} {winner['instance_type']}** "
        f"({winner['gpus_per_instance']} x {winner['gpu']}), {winner['model']} "
        f"{winner['precision']}, {layout} on {common.plural(winner['peak_instances'], 'instance')} "
        f"({winner['mean_instances']:.1f} on average), bought **{chosen['option']}**."
    )
    api = data.get("api") or {}
    common.api_plan_note(api.get("choice"), tables.api_plan_monthly_usd(api), winner["monthly_usd"])
    money = st.columns(4)
    money[0].metric(
        "$ per month",
        common.money(winner["monthly_usd"]),
        delta=f"-{plan['savings_vs_on_demand_pct']:.0f}% vs on-demand",
        delta_color="inverse",
        help=f"Bought {chosen['option']}.",
    )
    money[1].metric(
        "Saved vs all on-demand",
        common.money(plan["savings_vs_on_demand_monthly_usd"]),
        help=f"All on-demand: {common.money(plan['all_on_demand_monthly_usd'])} per month.",
    )
    per_million = winner.get("usd_per_million_tokens")
    money[2].metric(
        "$ per million tokens",
        common.unit_price(per_million),
        help="Input and output tokens of a 730-hour month of this demand.",
    )
    money[3].metric("Instances at peak", f"{winner['peak_instances']:,}")
    _architecture(data)
    slos = _targets(data)
    for col, metric in zip(st.columns(3), METRICS, strict=True):
        value, target = _ms(winner.get(f"p99_{metric}_s")), slos[metric]
        col.metric(
            f"{METRICS[metric]} (simulated)",
            _duration(value),
            delta=None
            if value is None or target is None
            else f"{(value / target - 1) * 100:+.0f}% vs target {_duration(target)}",
            delta_color="inverse",
            help="no target set" if target is None else f"target {_duration(target)}",
        )


def _architecture(data: dict[str, Any]) -> None:
    """A disaggregated winner's roles and KV transfer; which architecture won and by how much."""
    winner, arch = data["winner"], data.get("architecture")
    if winner.get("architecture") == "disaggregated":
        transfer = (winner.get("verification") or {}).get("disaggregation") or {}
        t = transfer.get("transfer_s") or {}
        share = (transfer.get("transfer_share_of_ttft") or {}).get("p50")
        st.markdown(
            "**Disaggregated**: prefill and decode on pools of their own, the prompt's KV cache "
            f"sent over **{winner['kv_link']}**"
            + (" (assumed: not in the links catalog)" if winner.get("kv_link_assumed") else "")
            + (
                f": transfer P99 {_duration(_ms(t.get('p99')))}, {share:.1%} of TTFT at the median."
                if share is not None
                else "."
            )
        )
        common.table(
            [
                {
                    "role": pool["role"],
                    "$ per month": pool["monthly_usd"],
                    "replicas at peak": pool["replicas_peak"],
                    "TP": pool["tp"],
                    "max sequences": pool["max_seqs"],
                    "GPU": pool["gpu"],
                }
                for pool in winner["pools"]
            ],
            hide_index=True,
            column_config={"$ per month": MONEY},
        )
    sentence = architecture_sentence(arch)
    if sentence is not None:
        st.caption(sentence[0].upper() + sentence[1:] + ".")


def _api(data: dict[str, Any]) -> None:
    """The model's cheapest per-token API against self-hosting: the choice, the break-even and
    their costs against the load."""
    api = data.get("api") or {}
    offer = api.get("offer")
    if not offer:
        return
    st.subheader("Per-token API or self-hosting")
    hosted = api.get("self_hosted_monthly_usd")
    even = api.get("break_even") or {}
    st.markdown(
        f"**{offer['provider']} {offer['offer']}** would bill this demand "
        f"**${api['api_monthly_usd']:,.0f}** a month"
        + (f" against **${hosted:,.0f}** self-hosted" if hosted is not None else "")
        + f": **{api['choice']}**. "
        + (
            f"They cost the same at {even['requests_per_s']:,.3g} requests/s on average "
            f"({even['tokens_per_month'] / 1e6:,.0f} M tokens a month, "
            f"${even['usd_per_month']:,.0f} a month); below it the API is cheaper."
            if even.get("requests_per_s") is not None
            else "No break-even between 1/10,000 and 10,000 times this load."
        )
    )
    _overflow(api.get("overflow"), api.get("choice") == "overflow")
    fig = api_vs_self_hosted(data)
    if fig is not None:
        common.chart(fig, key="rec-api-chart")
    st.caption(
        f"Prices from {offer['source_url']} ({offer['source_date']}); "
        "`planner prices list --kind api` lists every offer."
    )


def _overflow(plan: dict[str, Any] | None, chosen: bool) -> None:
    """The overflow plan: a base fleet all month with the peaks on the API, or why none."""
    if not plan:
        return
    if plan.get("rejected"):
        st.caption(f"No overflow plan: {plan['rejected']}.")
        return
    check = plan.get("verification") or {}
    st.markdown(
        f"**Overflow plan{' (recommended)' if chosen else ''}:** "
        f"{common.plural(plan['base_replicas'], 'replica')} on "
        f"{common.plural(plan['base_instances'], 'instance')} all month "
        f"({plan['purchase']['option']}, ${plan['base_monthly_usd']:,.0f}) and the API for "
        f"{plan['api_share']:.1%} of requests (${plan['api_monthly_usd']:,.0f}): "
        f"**${plan['monthly_usd']:,.0f}** a month. Requests go to the API when every replica "
        f"holds {plan['queue_threshold']}; simulated on the peak hours, "
        f"{(check.get('overflow') or {}).get('requests', 0):,} of "
        f"{check.get('requests', 0):,} requests overflowed and every P99 target held."
    )


def _confidence(data: dict[str, Any]) -> None:
    """The confidence margin: each P99 target's point and upper bound, the error group, and
    what the margin costs a month (older results have none)."""
    conf = data.get("confidence") or {}
    level = conf.get("level")
    if not conf or data.get("winner") is None:
        return
    if level is None:
        st.caption("No confidence margin: the fleet is sized on the point estimates.")
        return
    rows = [
        {
            "target": METRICS[metric],
            "P99 (simulated)": _duration(_ms(row["point_p99_s"])),
            f"upper bound at {level:.0%}": _duration(_ms(row["upper_s"])),
            "target P99": _duration(_ms(row["target_s"])),
            "model error x": row["model_factor"],
            "error group": f"{row['error_group']['group']} ({row['error_group']['how']})",
        }
        for metric, row in conf["targets"].items()
        if row["target_s"] is not None
    ]
    left, right = st.columns([3, 1])
    with left:
        st.markdown(f"**P99 intervals at {level:.0%} confidence**")
        common.table(
            pd.DataFrame(rows),
            key="rec-confidence-table",
            column_config={"model error x": st.column_config.NumberColumn(format="%.2f")},
        )
    base = conf.get("point_estimate_fleet") or {}
    cost = conf.get("margin_usd_per_month")
    right.metric(
        "Margin cost per month",
        common.money(cost),
        help=f"The {level:.0%} margin over the cheapest fleet meeting the targets on the "
        f"point estimates ({common.money(base.get('monthly_usd'))} a month; found: "
        f"{base.get('found', common.MISSING)}).",
    )
    st.caption(
        f"Errors from {conf.get('accuracy_file')}; {conf.get('method')}. docs/recommender.md, "
        "Error bars."
    )


def _duration(ms: float | None) -> str:
    """Milliseconds, or seconds from 10 s up (an E2E of 52,338 ms reads as 52.3 s)."""
    if ms is None:
        return common.MISSING
    return f"{ms:,.0f} ms" if ms < 10_000 else f"{ms / 1e3:,.1f} s"


def _targets(data: dict[str, Any]) -> dict[str, float | None]:
    """The strictest P99 target of each kind over the request classes, in ms."""
    slos = data["request"]["targets"]["slos"].values()

    def least(metric: str) -> float | None:
        values = [s[f"{metric}_s"] for s in slos if s.get(f"{metric}_s")]
        return min(values) * 1e3 if values else None

    return {metric: least(metric) for metric in METRICS}


def _alternatives(data: dict[str, Any], name: str) -> None:
    st.subheader("Ranked alternatives (simulated)")
    frame = tables.alternatives(data)
    if frame.empty:
        st.info("Nothing was simulated: see the rejections below.", icon=":material/info:")
        return
    st.caption(
        "Cheapest verified first. Rank 1 is the recommendation; *configuration* is the "
        "candidate's id in the search (in the rejections and the JSON)."
    )
    frame = _ranked(frame)
    common.table(
        frame,
        column_config={
            "rank": st.column_config.NumberColumn(width=48, pinned=True),
            "$ per month": common.money_column(help="What analysts rank by: the plan's cost"),
            "all on-demand $ per month": common.MONEY_COLUMN,
            "$ per million tokens": common.PRICE_COLUMN,
            "P99 TTFT (ms)": st.column_config.NumberColumn(format="%.0f"),
            "P99 TPOT (ms)": st.column_config.NumberColumn(format="%.0f"),
            "P99 E2E (ms)": st.column_config.NumberColumn(format="%.0f"),
            "SLO margin": st.column_config.NumberColumn(
                format="percent", help="Distance to the nearest target"
            ),
        },
        key="rec-alternatives",
    )
    common.download_table(frame, f"{name}-alternatives", key="rec-alternatives-download")


# What people rank alternatives by comes first, so it fits a 1280-px screen; the rest follows.
LEADING = [
    "rank",
    "$ per month",
    "$ per million tokens",
    "met targets",
    "SLO margin",
    "provider",
    "instance",
    "GPUs",
    "precision",
    "TP",
    "purchase",
    "P99 TTFT (ms)",
    "P99 TPOT (ms)",
    "P99 E2E (ms)",
    "instances at peak",
]


def _ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """The alternatives with a rank 1..N (the table comes cheapest verified first), the
    columns analysts rank by first and the candidate's id named for what it is."""
    frame = frame.rename(columns={"#": "configuration"})
    frame.insert(0, "rank", range(1, len(frame) + 1))
    lead = [c for c in LEADING if c in frame.columns]
    return frame[lead + [c for c in frame.columns if c not in lead]]


def _pareto(data: dict[str, Any]) -> None:
    st.subheader("Cost against P99 latency")
    metric = st.selectbox(
        "P99 on the x axis",
        list(METRICS),
        format_func=lambda m: METRICS[m],
        key="rec-pareto-metric",
    )
    if not any(r.get(f"p99_{metric}_s") is not None for r in data["ranked"]):
        st.info("No simulated alternative to chart.", icon=":material/info:")
        return
    fig = cost_vs_p99(data, metric, common.PROVIDER_COLOURS)
    target = _targets(data)[metric]
    if target is not None:
        common.slo_line(fig, target, f"target {target:,.0f} ms")
    st.caption(
        "Colour: provider. Star: the recommendation. Dotted: the Pareto front of cost and "
        "this P99 (the cheapest fleet that reaches each P99). Ringed: on the front of cost, "
        "P99 TTFT and TPOT and quality together. x: missed a target."
    )
    common.chart(fig, key="rec-pareto-chart")


def _rejections(data: dict[str, Any], name: str) -> None:
    st.subheader("Rejected configurations")
    rejected = data["rejected"]
    if not rejected:
        st.info("None was rejected.", icon=":material/info:")
        return
    frame = tables.rejected(data)
    counts = tables.rejections_by_reason(data)
    left, right = st.columns([1, 2])
    with left:
        common.table(counts, key="rec-reject-counts")
        common.download_table(counts, f"{name}-rejections-by-reason", key="rec-reject-counts-dl")
    with right:
        kinds = [f"{s}: {r}" for s, r in zip(counts["stage"], counts["reason"], strict=True)]
        kept = [k for k in st.session_state.get("rec-reject-filter", []) if k in kinds]
        st.session_state["rec-reject-filter"] = kept  # another recommendation's reasons go
        chosen = st.multiselect(
            "Show stages and reasons (empty: all)", kinds, key="rec-reject-filter"
        )
        if chosen:
            frame = frame[(frame["stage"] + ": " + frame["reason"]).isin(chosen)]
        common.table(frame, key="rec-rejected")
        common.download_table(frame, f"{name}-rejected", key="rec-rejected-dl")


def _plan(data: dict[str, Any], name: str) -> None:
    plan = data.get("plan")
    if plan is None:
        return
    st.subheader("Commitment plan")
    chosen = plan["chosen"]
    bought = (
        "everything on demand"
        if chosen["option"] == "on-demand"
        else f"**{chosen['option']}** for {tables.commitment_level(chosen)} (break-even at "
        f"{chosen['break_even_utilization']:.0%} utilization), the rest on demand"
    )
    spot = f", {chosen['spot_share']:.0%} of it on spot" if chosen.get("spot_share") else ""
    st.markdown(
        f"Buy {bought}{spot}: **${chosen['monthly_usd']:,.0f} per month**, "
        f"${plan['savings_vs_on_demand_monthly_usd']:,.0f} "
        f"({plan['savings_vs_on_demand_pct']:.1f}%) less than all on-demand "
        f"(${plan['all_on_demand_monthly_usd']:,.0f})."
    )
    options = tables.purchase_options(data)
    percent = st.column_config.NumberColumn(format="percent")
    st.markdown("Ways to buy this fleet, cheapest first")
    common.table(
        options,
        column_config={
            "$ per month": common.MONEY_COLUMN,
            "break-even utilization": percent,
            "utilization": percent,
            "committed utilization": percent,
        },
        key="rec-plan-options",
    )
    common.download_table(options, f"{name}-purchase-options", key="rec-plan-options-dl")
    sensitivity = tables.sensitivity(data)
    st.markdown("If the load moves ±20%: this plan kept, or bought again for the new load")
    common.table(
        sensitivity,
        column_config={
            "$ per month with this plan": common.MONEY_COLUMN,
            "$ per month replanned": common.MONEY_COLUMN,
        },
        key="rec-sensitivity",
    )
    common.download_table(sensitivity, f"{name}-sensitivity", key="rec-sensitivity-dl")


def _fleet(data: dict[str, Any], name: str) -> None:
    if "instances" not in data["hourly"]:
        return
    st.subheader("The fleet hour by hour")
    fig = fleet_by_purchase(data, common.PURCHASE_COLOURS)
    if fig is not None:
        common.chart(fig, key="rec-fleet-chart")
    frame = tables.hourly(data)
    common.download_table(frame, f"{name}-hourly", key="rec-hourly-dl")


def _notes(data: dict[str, Any]) -> None:
    for note in data.get("notes", []):
        st.info(note, icon=":material/info:")
    s = data["stats"]
    st.caption(
        f"Searched {s['candidates']:,} configurations: {s['screened']:,} screened, "
        f"{s['passed_screen']:,} passed the screen, {s['verified']:,} simulated "
        f"({s['simulations']:,} runs on {s['runner']}) in {s['wall_s']:,.1f} s."
    )
    with st.expander("Targets, constraints and search settings"):
        st.json(data["request"], expanded=False)


# ---------------------------------------------------------------------------------------------
# A fleet of pools (several models, or a model's request sizes on several GPU types)

MONEY = common.MONEY_COLUMN  # $1,235
MILLISECONDS = st.column_config.NumberColumn(format="%.0f")
SHARE = st.column_config.NumberColumn(format="percent")


def _show_fleet(data: dict[str, Any], name: str) -> None:
    """A fleet of pools: its headline, the pools, the fleet by hour stacked by pool, the cost
    per model against one pool each, the savings plans across pools; JSON download."""
    _fleet_headline(data)
    if data.get("winner") is not None:
        _fleet_pools(data, name)
        _fleet_chart(data, name)
        _fleet_models(data, name)
        _fleet_plans(data, name)
    _fleet_notes(data)
    common.download_json(data, name, key="rec-json")


def _fleet_headline(data: dict[str, Any]) -> None:
    d = data["demand"]
    shares = ", ".join(
        f"{m['model']} {m['share_of_requests']:.0%}" for m in data.get("models") or []
    )
    st.caption(
        f"Demand: {d['source']}: {d['hours']:,} h, {d['requests']:,.0f} requests, peak "
        f"{d['peak_requests_per_s']:,.2f} req/s; requests by model: {shares}"
    )
    st.subheader("Recommended fleet of pools")
    winner = data.get("winner")
    if winner is None:
        missing = [m for m in data.get("models") or [] if not m.get("pools")]
        st.error(
            "No fleet: "
            + "; ".join(f"{m['model']}: {m.get('how')}" for m in missing)
            + ". Every model needs a fleet that meets its targets.",
            icon=":material/block:",
        )
        return
    pools, models = winner["pools"], winner["models"]
    single = winner.get("single_pool_monthly_usd")
    saving = float(winner.get("saving_vs_single_pool_usd") or 0.0)
    st.markdown(
        f"**{common.plural(len(pools), 'pool')}** for "
        f"**{common.plural(len(models), 'model')}**, each pool verified by "
        "simulation on its own requests (the router sends a request to the pool of its model "
        "and input size)"
        + (
            f"; **{common.plural(len(winner['api_pools']), 'model')}** bought by the token."
            if winner.get("api_pools")
            else "."
        )
    )
    money = st.columns(4)
    money[0].metric(
        "Fleet $ per month",
        common.money(winner["monthly_usd"]),
        help="Every pool's fleet and its own commitment plan, per 730-hour month.",
    )
    money[1].metric(
        "Saved vs one pool per model",
        common.money(saving),
        delta=f"-{saving / single:.1%} vs {common.money(single)}"
        if single and saving > 0.5
        else None,
        delta_color="inverse",
        help="The cheapest single-pool fleet of each model, added up, minus the pools.",
    )
    money[2].metric("Pools", f"{len(pools):,}")
    money[3].metric("Instances at peak", f"{winner['peak_instances']:,}")


def _fleet_pools(data: dict[str, Any], name: str) -> None:
    st.markdown("**Pools**")
    frame = tables.fleet_pools(data)
    common.table(
        frame,
        column_config={
            "share of requests": SHARE,
            "$ per month": MONEY,
            "$ per million tokens": common.PRICE_COLUMN,
            "P99 TTFT (ms)": MILLISECONDS,
            "P99 TPOT (ms)": MILLISECONDS,
        },
        key="rec-fleet-pools",
    )
    common.download_table(frame, f"{name}-pools", key="rec-fleet-pools-dl")
    _fleet_api_pools(data)


def _fleet_api_pools(data: dict[str, Any]) -> None:
    """The models the fleet buys by the token (their pools left the GPU fleet)."""
    pools = (data.get("winner") or {}).get("api_pools") or []
    if not pools:
        return
    st.markdown("**Bought by the token** (a per-token API bills less than any pool of its own)")
    frame = pd.DataFrame(
        {
            "model": [p["pool"] for p in pools],
            "provider": [p["provider"] for p in pools],
            "offer": [p["offer"] for p in pools],
            "share of requests": [p["share_of_requests"] for p in pools],
            "requests per month": [p["requests_per_month"] for p in pools],
            "$ per month": [p["monthly_usd"] for p in pools],
            "prices of": [p["source_date"] for p in pools],
        }
    )
    common.table(
        frame,
        column_config={
            "share of requests": SHARE,
            "$ per month": MONEY,
            "requests per month": st.column_config.NumberColumn(format="%,.0f"),
        },
        key="rec-fleet-api-pools",
    )


def _fleet_chart(data: dict[str, Any], name: str) -> None:
    st.subheader("The fleet hour by hour, by pool")
    fig = fleet_by_pool(data)
    if fig is None:
        st.info("No hourly fleet is stored.", icon=":material/info:")
        return
    common.chart(fig, key="rec-fleet-pool-chart")
    frame = tables.fleet_hourly(data)
    common.download_table(frame, f"{name}-hourly", key="rec-hourly-dl")


def _fleet_models(data: dict[str, Any], name: str) -> None:
    st.subheader("Cost per model")
    frame = tables.fleet_models(data)
    common.table(
        frame,
        column_config={
            "share of requests": SHARE,
            "$ per month": MONEY,
            "one pool $ per month": MONEY,
            "saving $ per month": MONEY,
            "$ per million tokens": common.PRICE_COLUMN,
        },
        key="rec-fleet-models",
    )
    common.download_table(frame, f"{name}-models", key="rec-fleet-models-dl")


def _fleet_plans(data: dict[str, Any], name: str) -> None:
    """Each pool's own commitment plan, and a savings plan across a cloud's pools when the
    search found one."""
    winner = data["winner"]
    st.subheader("Commitment plans")
    rows = []
    for pool in winner["pools"]:
        plan = pool.get("plan") or {}
        chosen = plan.get("chosen") or {}
        option = chosen.get("option", common.MISSING)
        rows.append(
            {
                "pool": pool["pool"],
                "buy": option
                if option == "on-demand"
                else f"{option} for {tables.commitment_level(chosen)}",
                "$ per month": chosen.get("monthly_usd"),
                "all on-demand $ per month": plan.get("all_on_demand_monthly_usd"),
                "break-even utilization": chosen.get("break_even_utilization"),
            }
        )
    frame = pd.DataFrame(rows)
    common.table(
        frame,
        column_config={
            "$ per month": MONEY,
            "all on-demand $ per month": MONEY,
            "break-even utilization": SHARE,
        },
        key="rec-fleet-plans",
    )
    common.download_table(frame, f"{name}-pool-plans", key="rec-fleet-plans-dl")
    across = winner.get("fleet_savings_plans") or []
    if not across:
        st.caption(
            "No savings plan across pools: one needs two or more pools of a cloud whose "
            "instances a savings plan covers."
        )
        return
    st.markdown("One savings plan across a cloud's pools, against the pools' own plans")
    plans = pd.DataFrame(
        [
            {
                "provider": p["provider"],
                "plan": p["option"],
                "$ per hour": p["usd_per_hour"],
                "pools": ", ".join(p.get("pools") or []),
                "$ per month": p["monthly_usd"],
                "pools apart $ per month": p["pools_apart_monthly_usd"],
                "saving $ per month": p["saving_usd"],
                "utilization": p.get("utilization"),
            }
            for p in across
        ]
    )
    common.table(
        plans,
        column_config={
            "$ per hour": common.PRICE_COLUMN,
            "$ per month": MONEY,
            "pools apart $ per month": MONEY,
            "saving $ per month": MONEY,
            "utilization": SHARE,
        },
        key="rec-fleet-savings-plans",
    )
    if any(float(p["saving_usd"]) <= 0 for p in across):
        st.caption(
            "A saving of $0 or less: the plan across pools costs no less than the pools' own "
            "plans, which the fleet's $ per month keeps."
        )


def _fleet_notes(data: dict[str, Any]) -> None:
    for note in data.get("notes") or []:
        st.info(note, icon=":material/info:")
    s = data.get("stats") or {}
    if "wall_s" in s:
        st.caption(
            f"Searched in {s['wall_s']:,.1f} s ({s.get('screen_s', 0):,.1f} s screening, "
            f"{s.get('milp_s', 0):,.2f} s assigning sizes to configurations)."
        )
    with st.expander("Targets, constraints and search settings"):
        st.json(data["request"], expanded=False)


# ---------------------------------------------------------------------------------------------
# The page


def _page() -> None:
    st.title("Recommendations")
    st.caption(
        "The cheapest fleet that meets your P99 latency targets, verified by simulation, with "
        "the commitment plan behind it. Same search as `planner recommend`."
    )
    _collect_finished()  # before the store is read: a search stored just now is listed
    url, version = common.store_url(), common.version()
    stored = common.stored_recommendations(url, version)
    with st.expander("Find the cheapest fleet", expanded=not stored, icon=":material/search:"):
        _search_form(url, version)
    if any(not s.finished for s in _searches().statuses()):
        _progress()
    unstored = _say_outcome()
    if unstored is not None:
        _show_result(unstored, "recommendation-not-stored")
        return
    if not stored:
        common.empty_store_hint("stored recommendations")
        return
    by_id = {b["id"]: b for b in stored}
    if st.session_state.get("rec-stored") not in by_id:
        st.session_state["rec-stored"] = stored[-1]["id"]  # the newest
    chosen = st.selectbox(
        "Stored recommendation",
        list(by_id),
        format_func=lambda i: common.recommendation_label(by_id[i]),
        key="rec-stored",
    )
    with st.expander(f"All stored recommendations ({len(stored)})"):
        table = pd.DataFrame(stored)
        common.table(table, key="rec-stored-table")
        common.download_table(table, "recommendations", key="rec-stored-dl")
    data = common.stored_recommendation(url, version, chosen)
    _show_result(data, f"recommendation-{chosen}", chosen)


with common.shown_errors():
    _page()
