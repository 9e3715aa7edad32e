"""Benchmarks & calibration: the benchmark runs in the store (``planner bench run`` measures
them, ``planner bench import`` brings in guidellm and ``vllm bench serve`` results), one run's
latency distributions, how far the latency model's predictions are from what a run measured,
and the calibration profiles the model uses (bundled with planner, and fitted into the store by
``planner calibrate``) with their stated errors."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app import common
from planner.errors import UsageError
from planner.latency.calibration import Measurement, unit_of
from planner.latency.profile import Profile, bundled_profiles_path, load_bundled_profiles
from planner.latency.registry import profile_accuracy
from planner.usecases.bench_compare import (
    ComparisonRequest,
    compare_runs,
    measurements_of,
    profile_names,
    stored_profile_errors,
)
from planner.usecases.bench_runs import RunShowRequest, StoredRunsRequest, show_run, stored_runs

if TYPE_CHECKING:
    from planner.store.bench_runs import StoredRun

CALIBRATE_HINT = (
    "planner calibrate data/reference/published_latency.csv --name my-h100 --engine trtllm "
    "--gpu H100-SXM"
)
RUN_HINT = (
    "`planner bench run --url http://127.0.0.1:8000 --pattern concurrency --concurrency 8` "
    "measures a running server (vLLM, SGLang, TGI, ...; `planner bench serve` is a stand-in to "
    "try it on), and `planner bench import FILE` reads guidellm or `vllm bench serve` results"
)
# Per-request latencies drawn as distributions: (column, label).
CDF_COLUMNS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E latency"))
# Sweep lines: (summary key stem, label).
SWEEP_LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2el", "E2E latency"))
METRIC_LABELS = {
    "ttft": "TTFT",
    "tpot": "TPOT",
    "e2e": "E2E latency",
    "output_throughput": "output throughput",
    "request_throughput": "request throughput",
}
DEFAULT_PROFILE = "the engine's default"


def _row(profile: Profile, accuracy: dict[str, Any] | None) -> dict[str, Any]:
    """A profile with the error its fit states on the points it was not fitted to."""
    accuracy = accuracy or {}
    heldout = accuracy.get("heldout_test") or {}
    return {
        "profile": profile.name,
        "engine": profile.engine,
        "GPU": profile.gpu or "any",
        "fitted at": accuracy.get("fitted_at"),
        "points": accuracy.get("points"),
        "held-out points": heldout.get("points"),
        "held-out MAPE": heldout.get("mape"),
        "held-out median APE": heldout.get("median_ape"),
        "held-out worst APE": heldout.get("worst_ape"),
        "worst point": heldout.get("worst_point"),
        "after-fit MAPE (all points)": (accuracy.get("after_all") or {}).get("mape"),
        "sources": ", ".join(accuracy.get("sources") or []),
    }


def _tables(
    profiles: list[Profile], accuracy: Callable[[Profile], dict[str, Any] | None]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profiles and their stated errors, fitted parameters)."""
    return (
        pd.DataFrame([_row(p, accuracy(p)) for p in profiles]),
        pd.DataFrame([{"profile": p.name, **p.params()} for p in profiles]),
    )


@st.cache_data(show_spinner=False)
def _bundled(path: str, modified_ns: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The profiles bundled with planner (``data/calibration``), as the latency model loads
    them (cached on the file's modification time)."""
    return _tables(load_bundled_profiles(Path(path)), profile_accuracy)


@st.cache_data(show_spinner=False)
def _stored(url: str, version: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Profiles fitted into the store (``planner calibrate``), newest first."""
    stored = stored_profile_errors(common.session)
    errors = {p.name: accuracy for p, accuracy in stored}
    return _tables([p for p, _ in stored], lambda p: errors[p.name])


PERCENT = st.column_config.NumberColumn(format="percent")
ERROR_COLUMNS = {
    "held-out MAPE": PERCENT,
    "held-out median APE": PERCENT,
    "held-out worst APE": PERCENT,
    "after-fit MAPE (all points)": PERCENT,
}


# --- stored runs ------------------------------------------------------------------------------


@st.cache_data(show_spinner=False)
def _runs(url: str, version: str) -> list[StoredRun]:
    return stored_runs(StoredRunsRequest(), common.session)


@st.cache_data(show_spinner=False, max_entries=20)
def _requests(url: str, version: str, run_name: str) -> pd.DataFrame:
    frame = show_run(RunShowRequest(run_name, requests=True), common.session).requests
    assert frame is not None  # asked for
    return frame


def _hardware(run: StoredRun) -> str:
    gpu = run.gpu or "?"
    return f"{gpu} x{run.num_gpus}" if run.num_gpus and run.num_gpus > 1 else gpu


def runs_table(runs: list[StoredRun]) -> pd.DataFrame:
    """One row per run: where, on what and under which load it was measured, and its numbers
    (vLLM's summary keys)."""
    rows = []
    for run in runs:
        s = run.summary
        rows.append(
            {
                "name": run.name,
                "when (UTC)": run.created_at.strftime("%Y-%m-%d %H:%M"),
                "source": run.source,
                "hardware": _hardware(run),
                "model": run.model,
                "precision": run.precision,
                "engine": run.engine,
                "load": run.load_label,
                "completed": run.completed,
                "failed": run.failed,
                "mean TTFT (ms)": s.get("mean_ttft_ms"),
                "p99 TTFT (ms)": s.get("p99_ttft_ms"),
                "mean TPOT (ms)": s.get("mean_tpot_ms"),
                "p99 TPOT (ms)": s.get("p99_tpot_ms"),
                "mean E2E (ms)": s.get("mean_e2el_ms"),
                "p99 E2E (ms)": s.get("p99_e2el_ms"),
                "requests/s": s.get("request_throughput"),
                "output tokens/s": s.get("output_throughput"),
                "sweep": run.sweep,
            }
        )
    return pd.DataFrame(rows)


def runs_section(runs: list[StoredRun]) -> None:
    st.subheader("Runs")
    if not runs:
        st.info(
            f"No benchmark runs in this store yet. {RUN_HINT}; both keep what they measure "
            "here, for this page to show and to compare with the latency model.",
            icon=":material/info:",
        )
        return
    table = runs_table(runs)
    number = st.column_config.NumberColumn(format="%.1f")
    common.table(
        table,
        key="bench-runs",
        column_config={c: number for c in table.columns if "(ms)" in c or "/s" in c},
    )
    common.download_table(table, "benchmark-runs", key="bench-runs-dl")


def _metric_text(value: Any, unit: str, digits: int = 1) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return common.MISSING
    return f"{value:,.{digits}f} {unit}"


def summary_metrics(run: StoredRun) -> None:
    s = run.summary
    first = st.columns(4)
    first[0].metric("Completed", f"{run.completed:,}", help=f"{run.failed:,} failed")
    first[1].metric("Failed", f"{run.failed:,}")
    first[2].metric("Requests/s", _metric_text(s.get("request_throughput"), "req/s", 2))
    first[3].metric("Output tokens/s", _metric_text(s.get("output_throughput"), "tok/s"))
    second = st.columns(4)
    second[0].metric(
        "Mean TTFT",
        _metric_text(s.get("mean_ttft_ms"), "ms"),
        help=f"P99 {_metric_text(s.get('p99_ttft_ms'), 'ms')}",
    )
    second[1].metric("P99 TTFT", _metric_text(s.get("p99_ttft_ms"), "ms"))
    second[2].metric(
        "Mean TPOT",
        _metric_text(s.get("mean_tpot_ms"), "ms", 2),
        help=f"P99 {_metric_text(s.get('p99_tpot_ms'), 'ms', 2)}",
    )
    second[3].metric(
        "Mean E2E latency",
        _metric_text(s.get("mean_e2el_ms"), "ms", 0),
        help=f"P99 {_metric_text(s.get('p99_e2el_ms'), 'ms', 0)}",
    )


def cdf_figure(requests: pd.DataFrame) -> go.Figure:
    """The cumulative distribution of each latency over the completed requests, one panel each
    (their scales differ by orders of magnitude)."""
    done = requests[requests["status"] == "ok"]
    fig = make_subplots(rows=1, cols=len(CDF_COLUMNS), shared_yaxes=True)
    for position, (column, label) in enumerate(CDF_COLUMNS, start=1):
        values = np.sort(done[column].dropna().to_numpy(dtype=float))
        share = np.arange(1, values.size + 1) / max(values.size, 1)
        fig.add_trace(
            go.Scatter(
                x=values.tolist(), y=share.tolist(), mode="lines", name=label, line_shape="hv"
            ),
            row=1,
            col=position,
        )
        fig.update_xaxes(title_text=f"{label} (ms)", row=1, col=position)
    fig.update_yaxes(title_text="share of completed requests", tickformat=".0%", row=1, col=1)
    fig.update_layout(title="Latency distributions (CDF)", height=380)
    return fig


def sweep_figure(stages: list[StoredRun]) -> go.Figure:
    """Mean and P99 latencies of a sweep's stages against the request rate each achieved."""
    ordered = sorted(stages, key=lambda r: r.summary.get("request_throughput") or 0.0)
    rates = [r.summary.get("request_throughput") for r in ordered]
    fig = make_subplots(rows=1, cols=len(SWEEP_LATENCIES))
    for position, (key, label) in enumerate(SWEEP_LATENCIES, start=1):
        for statistic, dash in (("mean", "solid"), ("p99", "dot")):
            fig.add_trace(
                go.Scatter(
                    x=rates,
                    y=[r.summary.get(f"{statistic}_{key}_ms") for r in ordered],
                    mode="lines+markers",
                    name=f"{statistic} {label}",
                    line={"dash": dash},
                    text=[r.name for r in ordered],
                ),
                row=1,
                col=position,
            )
        fig.update_xaxes(title_text="requests/s achieved", row=1, col=position)
        fig.update_yaxes(title_text=f"{label} (ms)", row=1, col=position)
    fig.update_layout(title="Latency against request rate, stage by stage", height=380)
    return fig


def run_section(runs: list[StoredRun], url: str, version: str) -> StoredRun | None:
    st.subheader("One run")
    names = [r.name for r in runs]
    linked = common.linked_choice(names, "run")
    if linked is not None and st.session_state.get("bench-run-linked") != linked:
        st.session_state["bench-run-linked"] = linked  # a link opens on its run, once
        st.session_state["bench-run"] = linked
    if st.session_state.get("bench-run") not in names:
        st.session_state["bench-run"] = names[-1]  # the newest
    name = st.selectbox("Run", names, key="bench-run")
    run = next(r for r in runs if r.name == name)
    st.caption(
        f"{run.source} · {run.model or '?'} on {_hardware(run)}, {run.precision or '?'}, "
        f"{run.engine or '?'} · load {run.load_label}"
        + (f" · {run.target}" if run.target else "")
        + (f" · sweep {run.sweep}" if run.sweep else "")
    )
    summary_metrics(run)
    requests = _requests(url, version, run.name)
    if requests.empty:
        st.info(
            "This run has no per-request rows (an imported result keeps only its summary), so "
            "no latency distribution to draw.",
            icon=":material/info:",
        )
    elif not (requests["status"] == "ok").any():
        st.warning(
            "No request of this run completed: no latency to draw.", icon=":material/warning:"
        )
    else:
        common.chart(cdf_figure(requests), key="bench-cdf")
        with st.expander(f"The run's {len(requests):,} requests"):
            common.table(requests, key="bench-requests")
            common.download_table(requests, f"{run.name}-requests", key="bench-requests-dl")
    if run.sweep:
        stages = [r for r in runs if r.sweep == run.sweep]
        if len(stages) > 1:
            common.chart(sweep_figure(stages), key="bench-sweep")
    return run


# --- predicted vs measured --------------------------------------------------------------------


def _load_text(point: Measurement) -> str:
    if point.load_kind == "max":
        return "max"
    if point.load_kind == "qps":
        return f"rate {point.load:g}/s"
    return f"{point.load_kind} {point.load:g}"


@st.cache_data(show_spinner=False, max_entries=20)
def comparison(
    url: str, version: str, run_names: tuple[str, ...], choice: str
) -> tuple[pd.DataFrame, str]:
    """A row per measured metric and load of the runs (measured, predicted under the chosen
    profile, error), and the profile's name."""
    profile = None if choice == DEFAULT_PROFILE else choice
    compared = compare_runs(ComparisonRequest(run_names, profile), common.session)
    if not compared.points:
        return pd.DataFrame(), ""
    rows = []
    for name, point, predicted in ((c.run, c.point, c.predicted) for c in compared.points):
        rows.append(
            {
                "run": name,
                "metric": METRIC_LABELS.get(point.metric, point.metric),
                "load": _load_text(point),
                "input tokens": point.input_tokens,
                "output tokens": point.output_tokens,
                "measured": point.value,
                "predicted": predicted,
                "unit": unit_of(point.metric),
                "error %": None if predicted is None else 100.0 * (predicted / point.value - 1),
            }
        )
    return pd.DataFrame(rows), compared.profile


def profile_choices() -> list[str]:
    """The engine's default first, then every stored and bundled profile by name."""
    return [DEFAULT_PROFILE, *dict.fromkeys(profile_names(common.session))]


def comparison_figure(table: pd.DataFrame) -> go.Figure:
    """Measured against predicted, one colour per metric, on log axes (ms, tokens/s and
    requests/s side by side); on the dashed line the model is exact."""
    shown = table.dropna(subset=["predicted"])
    fig = go.Figure()
    for metric, group in shown.groupby("metric", sort=False):
        fig.add_trace(
            go.Scatter(
                x=group["measured"],
                y=group["predicted"],
                mode="markers",
                name=str(metric),
                marker={"size": 10},
                text=(group["run"] + ", " + group["load"] + ", " + group["unit"]).tolist(),
                hovertemplate="%{text}<br>measured %{x:.4g}<br>predicted %{y:.4g}",
            )
        )
    values = pd.concat([shown["measured"], shown["predicted"]])
    low, high = float(values.min()) / 1.5, float(values.max()) * 1.5
    fig.add_trace(
        go.Scatter(
            x=[low, high],
            y=[low, high],
            mode="lines",
            name="predicted = measured",
            line={"dash": "dash", "color": "grey"},
        )
    )
    common.log_axis(fig, "x", [low, high], title_text="measured (ms, tokens/s or requests/s)")
    common.log_axis(fig, "y", [low, high], title_text="predicted (same unit)")
    fig.update_layout(title="Predicted against measured", height=420)
    return fig


def comparison_section(run: StoredRun, runs: list[StoredRun], url: str, version: str) -> None:
    st.subheader("Predicted vs measured")
    stages = [r for r in runs if run.sweep and r.sweep == run.sweep]
    scope = [run]
    if len(stages) > 1:
        whole = st.radio(
            "Compare",
            [f"this run ({run.name})", f"its sweep ({run.sweep}, {len(stages)} stages)"],
            horizontal=True,
            key="bench-scope",
        )
        scope = stages if whole.startswith("its sweep") else [run]
    names = tuple(r.name for r in scope)
    try:
        measured = [point for r in scope for point in measurements_of(r)]
    except UsageError as exc:
        st.warning(
            f"planner cannot predict {'these runs' if len(scope) > 1 else 'this run'} with its "
            f"latency model: {exc}",
            icon=":material/help:",
        )
        return
    if not measured:
        st.info(
            "Nothing to compare: no request of this run completed, or its token lengths are "
            "unknown.",
            icon=":material/info:",
        )
        return
    choice = st.selectbox(
        "Calibration profile",
        profile_choices(),
        key="bench-profile",
        help="The engine's default is the profile the latency model uses for this GPU and "
        "engine (a stored one wins over a bundled one); any other bundled or stored profile "
        "can time it instead.",
    )
    table, profile_name = comparison(url, version, names, str(choice))
    errors = table["error %"].dropna().abs()
    left, middle, right = st.columns(3)
    left.metric(
        "Mean absolute error (MAPE)",
        f"{errors.mean():.1f}%" if len(errors) else common.MISSING,
        help="Mean of |predicted / measured - 1| over the metrics compared.",
    )
    middle.metric("Worst error", f"{errors.max():.1f}%" if len(errors) else common.MISSING)
    right.metric("Profile", profile_name)
    saturated = int(table["predicted"].isna().sum())
    if saturated:
        st.warning(
            f"{common.plural(saturated, 'measurement')} at a load the model says this "
            "deployment cannot sustain (queues without bound): no prediction to compare.",
            icon=":material/warning:",
        )
    common.table(
        table,
        key="bench-comparison",
        column_config={
            "measured": st.column_config.NumberColumn(format="%.4g"),
            "predicted": st.column_config.NumberColumn(format="%.4g"),
            "error %": st.column_config.NumberColumn(format="%+.1f%%"),
        },
    )
    common.download_table(table, f"{run.name}-predicted-vs-measured", key="bench-comparison-dl")
    if table["predicted"].notna().any():
        common.chart(comparison_figure(table), key="bench-comparison-chart")
    st.caption(
        "Fit a profile to your runs with `planner bench import FILE --out-csv rows.csv` then "
        f"`planner calibrate rows.csv --name NAME --engine ENGINE`, e.g. `{CALIBRATE_HINT}`."
    )


def benchmark_sections() -> None:
    url, version = common.store_url(), common.version()
    runs = _runs(url, version)
    runs_section(runs)
    if not runs:
        return
    run = run_section(runs, url, version)
    if run is not None:
        with common.shown_errors():
            comparison_section(run, runs, url, version)


def profile_sections() -> None:
    st.subheader("Bundled profiles")
    st.caption(
        "Fitted on published measurements; a held-out error is measured on points the fit "
        "did not see. A profile for a GPU wins over its engine's GPU-independent one."
    )
    path = bundled_profiles_path()
    if not path.exists():
        st.warning(f"No bundled profiles file at {path}.", icon=":material/warning:")
    else:
        profiles, params = _bundled(str(path), path.stat().st_mtime_ns)
        common.table(profiles, column_config=ERROR_COLUMNS, key="bench-bundled")
        common.download_table(profiles, "bundled-profiles", key="bench-bundled-dl")
        with st.expander("Fitted parameters of the bundled profiles"):
            common.table(params, key="bench-bundled-params")
            common.download_table(params, "bundled-profile-parameters", key="bench-params-dl")

    st.subheader("Profiles fitted into this store")
    stored, stored_params = _stored(common.store_url(), common.version())
    if stored.empty:
        st.info(
            "No profile fitted into this store yet. Fit one to your own measurements with "
            f"`planner calibrate` (it states the fit's error before storing it), e.g.\n\n"
            f"`{CALIBRATE_HINT}`",
            icon=":material/info:",
        )
    else:
        st.caption("They win over bundled profiles of the same GPU and engine.")
        common.table(stored, column_config=ERROR_COLUMNS, key="bench-stored")
        common.download_table(stored, "stored-profiles", key="bench-stored-dl")
        with st.expander("Fitted parameters of the stored profiles"):
            common.table(stored_params, key="bench-stored-params")
            common.download_table(
                stored_params, "stored-profile-parameters", key="bench-stored-params-dl"
            )

    st.caption(
        "Speed benchmarks of the planner itself (ingest, forecast, latency model, simulator, "
        "recommender, dashboard) are the scripts in `benchmarks/`; their results are in "
        "`docs/benchmarks.md`."
    )


st.title("Benchmarks & calibration")
st.caption(
    "Runs measured against real servers (or imported from guidellm and vLLM), their latency "
    "distributions, how far the latency model's predictions are from them, and the "
    "calibration profiles that time the model."
)
with common.shown_errors():
    benchmark_sections()
with common.shown_errors():
    profile_sections()
