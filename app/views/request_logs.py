"""Request logs: load a log from an upload (the same ingest as ``planner ingest``, all rows or
none), then see what each dataset holds: its summary (as ``planner datasets show`` prints it),
arrivals over time, token-length distributions and the split by model.

Everything shown is aggregated in the database (``planner.store.summaries``) and cached on the
store's contents, so a million-request dataset draws as fast as a small one after its first load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import common
from planner.common.text import duration_text
from planner.common.uploads import upload_file_name
from planner.errors import PlannerError
from planner.ingest import FORMAT_NAMES, TimeKind, TimeUnit
from planner.ingest.formats import FIELDS
from planner.ingest.options import ingest_options
from planner.ingest.pipeline import (
    KNOWN_SUFFIXES,
    IngestOptions,
    IngestResult,
    default_dataset_name,
)
from planner.usecases.datasets import (
    dataset_arrivals,
    dataset_models,
    dataset_token_counts,
    delete_dataset,
    list_datasets,
    show_dataset,
)
from planner.usecases.ingest import IngestRequest, Upload, ingest
from planner.workload.charts import TokenColumn, bin_counts, choose_bucket_s, span_s
from planner.workload.summary import DatasetSummary

# What the uploader accepts: the suffixes the ingest knows (".csv.gz" ends in "gz").
ACCEPTED_TYPES = sorted({suffix.lstrip(".") for suffix in KNOWN_SUFFIXES})
DETECT = "detect from the header"
HISTOGRAM_BINS = 60
MODELS_SHOWN = 3  # model names listed per dataset in the table
CACHE_ENTRIES = 64
# What the upload form's fields are called in messages (the CLI names its flags instead).
FIELD_NAMES = {
    "name": "Dataset name",
    "format": "Format",
    "map": "Column mapping",
    "time_format": "Time format",
    "timezone": "Time zone",
    "start": "Start time",
    "on_error": "Bad rows",
    "time_kind": "Arrival times",
    "time_unit": "Unit of numeric times",
}


# --- cached store reads -----------------------------------------------------------------------
# The list of datasets is keyed on the store's version; what is derived from one dataset on the
# dataset's own content key (``content_key``), so storing a forecast or another dataset does
# not make a million-request dataset's aggregates be read again.


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _records(url: str, version: str) -> list[dict[str, Any]]:
    return list_datasets(common.session, with_key=True)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _summary(url: str, key: str, name: str) -> DatasetSummary:
    return show_dataset(name, common.session).summary


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _arrivals(url: str, key: str, name: str, bucket_s: int) -> pd.DataFrame:
    return dataset_arrivals(name, bucket_s, common.session)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _token_counts(url: str, key: str, name: str, column: TokenColumn) -> pd.DataFrame:
    return dataset_token_counts(name, column, common.session)


@st.cache_data(show_spinner=False, max_entries=CACHE_ENTRIES)
def _models(url: str, key: str, name: str) -> pd.DataFrame:
    return dataset_models(name, common.session)


def _datasets_table(url: str, records: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for record in records:
        models = _models(url, record["content_key"], record["name"])
        listed = ", ".join(str(m) for m in models["model"].iloc[:MODELS_SHOWN])
        if len(models) > MODELS_SHOWN:
            listed += f" +{len(models) - MODELS_SHOWN} more"
        rows.append(
            {
                "name": record["name"],
                "format": record["format"],
                "requests": record["rows"],
                "skipped rows": record["skipped_rows"],
                "start (UTC)": _utc_text(record["start_at"]),
                "end (UTC)": _utc_text(record["end_at"]),
                "span": duration_text(span_s(record["start_at"], record["end_at"])),
                "models": listed,
                "created (UTC)": _utc_text(record["created_at"]),
                "source": common.file_name(record["source_path"]),
                "source path": record["source_path"],
            }
        )
    return pd.DataFrame(rows)


# --- formatting ---------------------------------------------------------------------------------


def _utc_text(moment: object) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment is not None else common.MISSING


def _tokens(value: float) -> str:
    return f"{value:,.0f}"


# --- ingest -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What the last ingest said, kept until the next upload."""

    kind: Literal["success", "info", "error"]
    text: str
    notes: tuple[str, ...] = ()
    dataset: str | None = None  # the dataset it landed in (to select it below)


def _result_outcome(file_name: str, result: IngestResult) -> Outcome:
    dataset = common.markdown_text(result.dataset)
    if result.status == "already-present":
        return Outcome(
            "info",
            f"{common.markdown_text(file_name)}: already present as dataset **{dataset}** "
            f"({result.rows:,} rows); "
            "nothing to do (tick *Replace a dataset of the same name* and choose its name to "
            "ingest it again)",
            dataset=result.dataset,
        )
    verb = "Replaced" if result.status == "replaced" else "Ingested"
    span = (
        f", {result.start_at:%Y-%m-%d %H:%M:%S} to {result.end_at:%Y-%m-%d %H:%M:%S} UTC"
        if result.start_at is not None and result.end_at is not None
        else ""
    )
    notes = [common.markdown_text(note) for note in result.notes]
    if result.out_of_order_rows:
        notes.append(
            f"{result.out_of_order_rows:,} rows arrived out of order; the store keeps them "
            "sorted by arrival"
        )
    if result.skipped_rows:
        notes.append(
            f"skipped {result.skipped_rows:,} bad rows; first: "
            + "; ".join(result.skipped_examples[:5])
        )
    return Outcome(
        "success",
        f"{verb} dataset **{dataset}** ({result.format}) from {common.markdown_text(file_name)}: "
        f"{common.plural(result.rows, 'row')}{span}, in {result.seconds:.1f} s",
        tuple(notes),
        result.dataset,
    )


def _ingest(file_name: str, data: BinaryIO, options: IngestOptions) -> Outcome:
    """Ingest an upload; the outcome to show (a located error is one)."""
    progress = st.progress(0.0, text=f"ingesting {file_name}")

    def advance(done: int, total: int | None) -> None:
        share = min(1.0, done / total) if total else 0.0
        progress.progress(share, text=f"ingesting {file_name}: {done:,} rows")

    try:
        request = IngestRequest(Upload(file_name, data), options)
        result = ingest(request, common.session, progress=advance)
    except PlannerError as exc:
        return Outcome("error", str(exc))
    finally:
        progress.empty()
    return _result_outcome(file_name, result)


def _show(outcome: Outcome) -> None:
    if outcome.kind == "error":
        st.error(outcome.text, icon=":material/error:")
    elif outcome.kind == "info":
        st.info(outcome.text, icon=":material/info:")
    else:
        st.success(outcome.text, icon=":material/check_circle:")
    for note in outcome.notes:
        st.warning(note, icon=":material/warning:")


def _mapping(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _form() -> dict[str, Any]:
    """The upload form's fields (below the uploader): what ``ingest_options`` takes."""
    left, middle, right = st.columns(3)
    name = left.text_input(
        "Dataset name", key="logs-name", help="Default: the file name without its suffixes."
    )
    start = middle.text_input(
        "Start time (UTC, ISO 8601)",
        key="logs-start",
        placeholder="2024-05-01T00:00:00Z",
        help="For logs whose times count from their start (Mooncake, BurstGPT).",
    )
    log_format = right.selectbox("Format", [DETECT, *FORMAT_NAMES], key="logs-format")
    with st.expander("More options: bad rows, replacing, a default model, generic columns"):
        skip = st.toggle(
            "Skip bad rows and report them (instead of stopping at the first)",
            key="logs-skip-bad",
        )
        replace = st.checkbox("Replace a dataset of the same name", key="logs-replace")
        any_time = st.checkbox(
            "Keep arrival times before 1970 or more than a year ahead",
            key="logs-any-time",
            help="Such a time is almost always a wrong unit or kind of time; tick this only "
            "for a log that really is that old or that far ahead.",
        )
        model = st.text_input("Model name for rows that have none", key="logs-model")
        st.markdown(
            "**Generic columns**: one `FIELD=COLUMN` per line; fields: "
            + ", ".join(f"`{f}`" for f in FIELDS)
        )
        mapping = st.text_area(
            "Column mapping",
            key="logs-map",
            placeholder="arrival=timestamp\ninput_tokens=prompt_tokens\noutput_tokens=completion_tokens",
        )
        kind_col, unit_col, format_col, zone_col = st.columns(4)
        time_kind = kind_col.selectbox(
            "Arrival times", [k.value for k in TimeKind], key="logs-time-kind"
        )
        time_unit = unit_col.selectbox(
            "Unit of numeric times", [u.value for u in TimeUnit], key="logs-time-unit"
        )
        time_format = format_col.text_input(
            "Time format (strptime)", key="logs-time-format", placeholder="ISO 8601"
        )
        timezone = zone_col.text_input("Time zone", value="UTC", key="logs-timezone")
    return {
        "name": name.strip() or None,
        "log_format": None if log_format == DETECT else log_format,
        "mapping": _mapping(mapping),
        "time_kind": time_kind,
        "time_unit": time_unit,
        "time_format": time_format.strip() or None,
        "timezone": timezone.strip() or "UTC",
        "start": start.strip() or None,
        "model": model.strip() or None,
        "on_error": "skip" if skip else "fail",
        "replace": replace,
        "allow_any_time": any_time,
    }


def _submitted(uploaded: Any, form: dict[str, Any]) -> Outcome:
    """The outcome of ingesting ``uploaded`` with the form's options (a bad option is one)."""
    try:
        options = ingest_options(**form, names=FIELD_NAMES)
    except PlannerError as exc:
        return Outcome("error", str(exc))
    uploaded.seek(0)
    return _ingest(uploaded.name, uploaded, options)


def ingest_section() -> None:
    st.subheader("Ingest a log")
    st.markdown(
        f"Upload a request log of up to **{common.UPLOAD_LIMIT_MB:,} MB**: CSV (or CSV.gz), "
        "JSON Lines or Parquet. The columns of the **Azure** LLM inference trace, **Mooncake** "
        "and **BurstGPT** are recognised from the header; any other log: name its columns "
        "under *More options* (generic columns). A log is stored whole or not at all: a bad "
        "row stops the ingest and says where it is."
    )
    uploaded = st.file_uploader(
        "Request log",
        type=ACCEPTED_TYPES,
        key="logs-upload",
        help="The same ingest as `planner ingest PATH`.",
    )
    if uploaded is not None and st.session_state.get("logs-upload-id") != uploaded.file_id:
        # A new file: its own default name, and the last file's message goes.
        st.session_state["logs-upload-id"] = uploaded.file_id
        st.session_state.pop("logs-outcome", None)
        try:
            st.session_state["logs-name"] = default_dataset_name(
                Path(upload_file_name(uploaded.name))
            )
        except PlannerError:
            st.session_state["logs-name"] = ""
    form = _form()
    clicked = st.button(
        "Ingest", key="logs-ingest", type="primary", icon=":material/upload:", disabled=not uploaded
    )
    if clicked and uploaded is not None:
        outcome = _submitted(uploaded, form)
        # Kept as a dict: this script's classes are new objects on every rerun.
        st.session_state["logs-outcome"] = asdict(outcome)
        if outcome.dataset is not None:
            st.session_state["logs-dataset"] = outcome.dataset
    last = st.session_state.get("logs-outcome")
    if isinstance(last, dict):
        _show(Outcome(**last))


# --- datasets -----------------------------------------------------------------------------------


def summary_metrics(summary: DatasetSummary) -> None:
    columns = st.columns(4)
    columns[0].metric("Requests", f"{summary.rows:,}", border=True)
    columns[1].metric(
        "Duration",
        duration_text(summary.duration_s),
        help=f"{_utc_text(summary.start_at)} to {_utc_text(summary.end_at)} UTC",
        border=True,
    )
    columns[2].metric(
        "Mean req/s",
        f"{summary.per_minute.mean / 60:,.2f}",
        help=f"{summary.per_minute.mean:,.1f} requests per minute over the log's span",
        border=True,
    )
    columns[3].metric(
        "Peak req/s",
        f"{summary.per_minute.peak / 60:,.2f}",
        help=f"the busiest sliding minute anywhere in the log: {summary.per_minute.peak:,} "
        "requests",
        border=True,
    )
    columns = st.columns(4)
    columns[0].metric("Input tokens P50", _tokens(summary.input_tokens.p50), border=True)
    columns[1].metric("Input tokens P99", _tokens(summary.input_tokens.p99), border=True)
    columns[2].metric("Output tokens P50", _tokens(summary.output_tokens.p50), border=True)
    columns[3].metric("Output tokens P99", _tokens(summary.output_tokens.p99), border=True)
    if summary.by_model:
        rows = [
            {
                "model": group.model,
                "requests": group.rows,
                "input tokens mean": round(group.input_tokens.mean),
                "input tokens P50": group.input_tokens.p50,
                "input tokens P99": group.input_tokens.p99,
                "output tokens mean": round(group.output_tokens.mean),
                "output tokens P50": group.output_tokens.p50,
                "output tokens P99": group.output_tokens.p99,
                "requests/min mean": round(group.per_minute.mean, 1),
                "requests/min peak": group.per_minute.peak,
            }
            for group in summary.by_model
        ]
        frame = pd.DataFrame(rows)
        common.table(
            frame,
            column_config={
                column: st.column_config.NumberColumn(column, format="localized")
                for column in frame.columns
                if column != "model"
            },
        )
        common.download_table(frame, "dataset-summary-by-model", key="logs-summary-by-model")


def arrivals_chart(url: str, key: str, name: str, summary: DatasetSummary) -> None:
    bucket_s = choose_bucket_s(summary.duration_s)
    frame = _arrivals(url, key, name, bucket_s)
    bucket = duration_text(bucket_s).replace(" 0s", "").replace("0h ", "")
    title = (
        "Arrivals: requests per minute"
        if bucket_s == 60
        else f"Arrivals: requests per minute, the mean of each {bucket} bucket"
    )
    fig = go.Figure(
        go.Scatter(
            x=frame["start"],
            y=frame["per_minute"],
            mode="lines",
            line={"color": common.PURCHASE_COLOURS["on-demand"], "width": 1.5},
            name="requests / min",
            hovertemplate="%{x|%Y-%m-%d %H:%M} UTC: %{y:,.1f} requests / min<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title="time (UTC)",
        yaxis_title="requests / min",
        yaxis_rangemode="tozero",
        height=320,
    )
    common.chart(fig, key="logs-arrivals-chart")
    common.download_table(
        frame.assign(start=frame["start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")),
        f"{name}-arrivals",
        key="logs-arrivals",
    )


def token_charts(url: str, key: str, name: str) -> None:
    log_x = st.toggle("Log scale for token lengths", key="logs-log-x")
    columns = st.columns(2)
    labels: dict[TokenColumn, str] = {"input_tokens": "Input", "output_tokens": "Output"}
    colours: dict[TokenColumn, str] = {
        "input_tokens": common.PURCHASE_COLOURS["on-demand"],
        "output_tokens": common.PURCHASE_COLOURS["spot"],
    }
    for column, place in zip(labels, columns, strict=True):
        histogram = bin_counts(_token_counts(url, key, name, column), HISTOGRAM_BINS, log=log_x)
        if histogram.requests.size == 0:
            place.info(f"No {labels[column].lower()} token lengths.")
            continue
        edges = [*histogram.lower, histogram.upper[-1]]
        counts = [*histogram.requests, histogram.requests[-1]]
        fig = go.Figure(
            go.Scatter(
                x=edges,
                y=counts,
                mode="lines",
                line={"shape": "hv", "color": colours[column]},
                fill="tozeroy",
                name=f"{labels[column].lower()} tokens",
                hovertemplate="from %{x:,.0f} tokens: %{y:,} requests<extra></extra>",
            )
        )
        fig.update_layout(
            title=f"{labels[column]} token lengths",
            xaxis_title="tokens",
            yaxis_title="requests",
            xaxis_type="log" if log_x else "linear",
            height=300,
        )
        if log_x:
            common.log_axis(fig, "x", edges)
        with place:
            common.chart(fig, key=f"logs-{column}-chart")
            common.download_table(histogram.frame(), f"{name}-{column}", key=f"logs-{column}")


def model_chart(url: str, key: str, name: str) -> None:
    frame = _models(url, key, name)
    if len(frame) == 1:
        st.caption(
            f"One model: {common.markdown_text(str(frame['model'].iloc[0]))} "
            f"(all {int(frame['requests'].iloc[0]):,} requests)."
            + (" The log names no model." if frame["model"].iloc[0] == "(none)" else "")
        )
    else:
        fig = go.Figure(
            go.Bar(
                x=frame["requests"],
                y=frame["model"],
                orientation="h",
                marker_color=common.PURCHASE_COLOURS["on-demand"],
                text=[f"{share:.1%}" for share in frame["share"]],
                textposition="auto",
                hovertemplate="%{y}: %{x:,} requests<extra></extra>",
            )
        )
        fig.update_layout(
            xaxis_title="requests",
            yaxis_title="model",
            yaxis={"autorange": "reversed"},
            height=max(240, 40 * len(frame) + 120),
        )
        common.chart(fig, key="logs-models-chart")
    common.table(
        frame,
        column_config={
            "share": st.column_config.NumberColumn("share", format="percent"),
            **{
                column: st.column_config.NumberColumn(column, format="localized")
                for column in ("requests", "input_tokens", "output_tokens")
            },
        },
    )
    common.download_table(frame, f"{name}-models", key="logs-models")


def delete_section(name: str, rows: int) -> None:
    with st.expander("Delete this dataset"):
        sure = st.checkbox(
            f"Yes, delete {name} and its {rows:,} requests", key="logs-delete-confirm"
        )
        if st.button("Delete dataset", key="logs-delete", disabled=not sure, type="secondary"):
            with common.shown_errors():
                removed = delete_dataset(name, common.session)
                st.session_state["logs-outcome"] = asdict(
                    Outcome(
                        "success",
                        f"Deleted dataset **{common.markdown_text(name)}** ({removed:,} rows)",
                    )
                )
                st.session_state.pop("logs-dataset", None)
                st.session_state.pop("logs-delete-confirm", None)
            st.rerun()


def datasets_section() -> None:
    st.subheader("Datasets")
    url = common.store_url()
    records = _records(url, common.version())
    if not records:
        common.empty_store_hint("datasets")
        return
    table = _datasets_table(url, records)
    common.table(
        table,
        column_config={
            "requests": st.column_config.NumberColumn("requests", format="localized"),
            "source": st.column_config.TextColumn(
                help="The file the log was read from, by name; its full path is the last column"
            ),
        },
    )
    common.download_table(table, "datasets", key="logs-datasets")
    keys = {str(r["name"]): str(r["content_key"]) for r in records}
    names = list(keys)
    linked = common.linked_choice(names)
    if linked is not None and st.session_state.get("logs-linked") != linked:
        st.session_state["logs-linked"] = linked  # a link opens on its dataset, once
        st.session_state["logs-dataset"] = linked
    if st.session_state.get("logs-dataset") not in names:
        st.session_state["logs-dataset"] = names[-1]  # the newest
    name = st.selectbox("Dataset", names, key="logs-dataset")
    if name is None:
        return
    key = keys[name]
    summary = _summary(url, key, name)
    summary_metrics(summary)
    arrivals_chart(url, key, name, summary)
    token_charts(url, key, name)
    st.markdown("**Requests per model**")
    model_chart(url, key, name)
    delete_section(name, summary.rows)


st.title("Request logs")
st.caption(
    "Load a request log, then see its size, span, request rates, token lengths and models: "
    "the datasets the forecasts, the simulator and the recommendations read."
)
with common.shown_errors():
    ingest_section()
with common.shown_errors():
    datasets_section()
