"""Latency model: for one deployment (GPU, model, precision, tensor parallelism, engine, KV-cache
precision, memory share, batch, request shape) the predicted TTFT, time per output token and
end-to-end latency, where each GPU's memory goes, how many tokens the KV cache holds, the
maximum throughput, and the calibration profile the numbers come from with the error it states.

Every number comes from ``planner.usecases.predict.predict_latency``, the function ``planner
latency`` prints; the page only lays it out.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import common
from planner.latency.catalog import load_catalog
from planner.latency.engines import get_engine
from planner.latency.predict import LatencyQuery, latency_by_batch, memory_breakdown
from planner.usecases.predict import predict_latency

DEFAULTS = {"gpu": "H100-SXM", "model": "llama-3.1-8b", "precision": "bf16"}
ENGINE_DEFAULT = "engine default"
MEMORY_COLOURS = {
    "weights": "#636EFA",
    "activations": "#FFA15A",
    "KV cache": "#00CC96",
    "free": "#D3D3D3",
}
TTFT_COLOUR, TPOT_COLOUR = "#636EFA", "#EF553B"
SIM_REQUESTS = 10_000  # the CLI's default, when the analyst asks for simulated percentiles


@st.cache_data(show_spinner=False, max_entries=64)
def _prediction(
    url: str, version: str, query: LatencyQuery
) -> tuple[dict[str, Any], str | None, pd.DataFrame, dict[str, Any] | None]:
    """The result ``planner latency --json`` prints, why the batch cannot run (if so), latency
    against batch size, and the profile's stated error."""
    prediction = predict_latency(query, common.session, batch_must_fit=False)
    curve = latency_by_batch(prediction)
    return prediction.result, prediction.batch_problem, curve, prediction.accuracy


def _inputs() -> LatencyQuery:
    catalog = load_catalog()
    choice, second = common.deployment_inputs("latency", DEFAULTS)
    gpu, model, precision, tp, engine = (
        choice.gpu,
        choice.model,
        choice.precision,
        choice.tp,
        choice.engine,
    )
    spec = get_engine(engine)
    own_kv = spec.default_kv_cache(catalog.precisions.get(precision), catalog.gpus.get(gpu))
    kv_choice = second[0].selectbox(
        "KV-cache precision",
        [ENGINE_DEFAULT, "fp16", "fp8"],
        format_func=lambda v: f"{v} ({own_kv})" if v == ENGINE_DEFAULT else v,
        key="latency-kv",
        help="The engine's default: TensorRT-LLM keeps an FP8 KV cache under FP8 weights; "
        "vLLM and SGLang keep the model's 16-bit dtype.",
    )
    utilization = second[1].number_input(
        "GPU memory utilization",
        min_value=0.1,
        max_value=1.0,
        value=None,
        step=0.01,
        placeholder=f"engine default ({spec.memory_fraction:g})",
        key="latency-memory",
        help="The share of each GPU's memory the engine may use (vLLM's "
        "gpu_memory_utilization); empty: the engine's default.",
    )
    static = second[2].toggle(
        "Static batching",
        value=False,
        key="latency-static",
        help="The batch prefilled together, then decoded together (benchmark tables' static "
        "rows), instead of one request joining a continuous batch.",
    )
    third = st.columns(4)
    batch = third[0].number_input(
        "Batch size (sequences)", min_value=1, value=1, step=1, key="latency-batch"
    )
    input_tokens = third[1].number_input(
        "Input tokens", min_value=1, value=1024, step=64, key="latency-input"
    )
    output_tokens = third[2].number_input(
        "Output tokens", min_value=1, value=256, step=16, key="latency-output"
    )
    qps = third[3].number_input(
        "Load (requests/s, optional)",
        min_value=0.001,
        value=None,
        step=1.0,
        placeholder="none",
        key="latency-qps",
        help="Also: mean latencies under this Poisson load, or the saturation point.",
        disabled=static,
    )
    simulate = False
    if qps is not None and not static:
        simulate = st.checkbox(
            f"Also simulate P50/P90/P99 under this load ({SIM_REQUESTS:,} requests)",
            value=False,
            key="latency-simulate",
        )
    return LatencyQuery(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=int(tp),
        batch=int(batch),
        static=static,
        input_tokens=int(input_tokens),
        output_tokens=int(output_tokens),
        engine=engine,
        kv_cache=None if kv_choice == ENGINE_DEFAULT else kv_choice,
        memory_utilization=utilization,
        qps=None if static else qps,
        sim_requests=SIM_REQUESTS if simulate else 0,
    )


def _latency_metrics(result: dict[str, Any], problem: str | None) -> None:
    if problem is not None:
        st.warning(
            f"**Saturated**: the batch does not fit the KV cache. {problem}",
            icon=":material/warning:",
        )
    columns = st.columns(3)
    for column, (key, label, digits) in zip(
        columns,
        (("ttft_ms", "TTFT", 1), ("tpot_ms", "TPOT", 2), ("e2e_ms", "E2E", 0)),
        strict=True,
    ):
        value = result[key]
        column.metric(
            f"{label} (ms)",
            "saturated" if value is None else f"{value:,.{digits}f}",
            help=f"{label} of one request in a {result['batching']} batch of "
            f"{result['batch']:,}, {result['input_tokens']:,} tokens in, "
            f"{result['output_tokens']:,} out",
        )
    capacity = st.columns(4)
    capacity[0].metric("KV cache (tokens)", f"{result['kv_capacity_tokens']:,}")
    capacity[1].metric(
        "Max sequences at once",
        f"{result['max_concurrent_sequences']:,}",
        help="Sequences of this shape the KV cache holds together (and the engine's cap of "
        f"{result['max_seqs']:,})",
    )
    capacity[2].metric("Max output tokens/s", f"{result['max_output_tokens_per_s']:,.0f}")
    capacity[3].metric("Max requests/s", f"{result['max_requests_per_s']:,.2f}")


def _memory_chart(result: dict[str, Any]) -> None:
    parts = memory_breakdown(result["memory"])
    fig = go.Figure()
    for name, gib in parts.items():
        fig.add_bar(
            y=["per GPU"],
            x=[gib],
            name=f"{name} {gib:,.1f} GiB",
            orientation="h",
            marker_color=MEMORY_COLOURS[name],
            hovertemplate=f"{name}: %{{x:,.2f}} GiB<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        height=260,
        title=f"GPU memory: {result['memory']['device_gib']:,.1f} GiB per GPU",
        xaxis_title="GiB",
        legend={"traceorder": "normal", "orientation": "h", "y": -0.55, "x": 0},
        margin={"t": 40},
    )
    common.chart(fig, key="latency-memory-chart")
    st.caption(f"{result['engine']} gives {result['memory_rule']}.")


def _batch_chart(result: dict[str, Any], curve: pd.DataFrame) -> None:
    if curve.empty:
        return
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=curve["batch"],
        y=curve["ttft_ms"],
        name="TTFT",
        mode="lines+markers",
        line_color=TTFT_COLOUR,
        secondary_y=False,
    )
    fig.add_scatter(
        x=curve["batch"],
        y=curve["tpot_ms"],
        name="TPOT",
        mode="lines+markers",
        line_color=TPOT_COLOUR,
        secondary_y=True,
    )
    most = result["max_concurrent_sequences"]
    fig.add_vline(
        x=most,
        line={"color": "#444444", "dash": "dot"},
        annotation_text=f"KV cache holds {most:,}",
        annotation_position="top left",
    )
    common.on_log_axis(fig, most)
    if result["ttft_ms"] is not None:
        fig.add_vline(
            x=result["batch"],
            line={"color": "#999999", "dash": "dash"},
            annotation_text=f"batch {result['batch']:,}",
            annotation_position="bottom right",
        )
        common.on_log_axis(fig, result["batch"])
    fig.update_layout(title="Latency against batch size", height=380)
    marked = [*curve["batch"], most, result["batch"]]  # the lines drawn stay in range
    common.log_axis(fig, "x", marked, title_text="batch size (sequences)")
    fig.update_yaxes(title_text="TTFT (ms)", secondary_y=False)
    fig.update_yaxes(title_text="TPOT (ms)", secondary_y=True, tickmode="auto", showgrid=False)
    common.chart(fig, key="latency-batch-chart")


def _percent(value: float | None) -> str:
    return common.MISSING if value is None else f"{value:.1%}"


def _profile(result: dict[str, Any], accuracy: dict[str, Any] | None) -> None:
    st.subheader("Calibration profile")
    name = result["profile"]
    if accuracy is None:
        st.info(
            f"Profile **{name}** has no recorded fit: its numbers are planner's built-in "
            "starting values, with no stated error.",
            icon=":material/info:",
        )
        return
    origin = (
        "stored in this store by `planner calibrate`"
        if accuracy["origin"] == "store"
        else "bundled with planner (data/calibration/profiles.json)"
    )
    sources = ", ".join(accuracy["sources"]) or "unrecorded measurements"
    st.markdown(
        f"Profile **{name}** ({result['engine']}), {origin}, fitted "
        f"{accuracy['fitted_at'] or 'on an unrecorded date'} on {accuracy['points'] or 0} "
        f"measured points from {sources}."
    )
    held, fitted = accuracy.get("heldout_test") or {}, accuracy.get("after_all") or {}
    columns = st.columns(2)
    columns[0].metric(
        "Held-out MAPE",
        _percent(held.get("mape")),
        help=f"Mean absolute percentage error on {held.get('points', 0)} measured points the "
        "fit did not see",
    )
    columns[1].metric(
        "Fitted MAPE",
        _percent(fitted.get("mape")),
        help=f"On all {fitted.get('points', 0)} points, after fitting on them",
    )
    st.caption(
        f"Worst fitted point: {_percent(fitted.get('worst_ape'))} off"
        + (f" ({fitted['worst_point']})" if fitted.get("worst_point") else "")
    )
    rows = []
    for split, summary in (("held out", held), ("after fitting", fitted)):
        for metric, errors in (summary.get("by_metric") or {}).items():
            rows.append(
                {
                    "points": split,
                    "metric": metric,
                    "count": int(errors["points"]),
                    "MAPE": errors["mape"],
                    "median APE": errors["median_ape"],
                }
            )
    if rows:
        frame = pd.DataFrame(rows)
        common.table(
            frame,
            column_config={
                "MAPE": st.column_config.NumberColumn(format="percent"),
                "median APE": st.column_config.NumberColumn(format="percent"),
            },
        )
        common.download_table(frame, f"profile-{name}-errors", key="latency-profile-errors")


def _under_load(result: dict[str, Any]) -> None:
    loaded = result["under_load"]
    if loaded is None:
        return
    st.subheader(f"Under {loaded['load']:g} requests/s")
    if loaded["saturated"]:
        st.warning(
            f"**Saturated**: capacity is about {loaded['capacity_qps']:g} requests/s of this "
            f"shape ({loaded['reason']}); queues would grow without bound. To serve it: "
            + "; or ".join(loaded["options"]),
            icon=":material/warning:",
        )
        return
    columns = st.columns(4)
    columns[0].metric("Mean TTFT (ms)", f"{loaded['ttft_ms']:,.1f}")
    columns[1].metric("Mean TPOT (ms)", f"{loaded['tpot_ms']:,.2f}")
    columns[2].metric("Mean E2E (ms)", f"{loaded['e2e_ms']:,.0f}")
    columns[3].metric("Capacity (requests/s)", f"{result['capacity_qps']:g}")
    simulated = loaded["percentiles"]
    if simulated is None:
        st.caption(f"Percentiles: {loaded['percentiles_note']}")
        return
    frame = pd.DataFrame(
        [
            {"latency": label, **{k.upper(): simulated[key][k] for k in ("p50", "p90", "p99")}}
            for key, label in (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("e2e", "E2E (ms)"))
            if key in simulated
        ]
    )
    common.table(frame)
    st.caption(
        f"From the discrete-event simulator: {simulated['requests']:,} Poisson arrivals, "
        f"{simulated['excluded']} excluded."
    )
    common.download_table(frame, "latency-under-load", key="latency-load-table")


def _details(result: dict[str, Any]) -> None:
    with st.expander("Deployment details"):
        memory = result["memory"]
        rows = [
            ("deployment", f"{result['model']} {result['precision']} on {result['tp']} x "
             f"{result['gpu']} with {result['engine']}"),
            ("KV-cache precision", f"{result['kv_cache']} ({result['kv_cache_source']})"),
            ("memory rule", f"{result['engine']} gives {result['memory_rule']}"),
            ("weights per GPU", f"{memory['weights_gib']:,.2f} GiB"),
            ("activations + runtime per GPU", f"{memory['activations_gib']:,.2f} GiB"),
            ("KV cache per GPU", f"{memory['kv_cache_gib']:,.2f} GiB"),
            ("max sequences (engine)", f"{result['max_seqs']:,}"),
            ("quality vs BF16", f"{result['quality_delta_pct']:+.1f}%"),
        ]  # fmt: skip
        frame = pd.DataFrame(rows, columns=["", "value"])
        common.table(frame)
        common.download_table(frame, "latency-deployment", key="latency-details")
        common.download_json(result, "latency", key="latency-json")
        st.caption("The JSON is what `planner latency --json` prints for the same inputs.")


st.title("Latency model")
st.caption(
    "Predicted latency, memory and throughput of one deployment, from planner's roofline model "
    "timed by a calibration profile: the numbers `planner latency` prints."
)
query = _inputs()
with common.shown_errors():
    result, problem, curve, accuracy = _prediction(common.store_url(), common.version(), query)
    _latency_metrics(result, problem)
    left, right = st.columns([3, 2])
    with left:
        _batch_chart(result, curve)
    with right:
        _memory_chart(result)
        _profile(result, accuracy)
    _under_load(result)
    _details(result)
