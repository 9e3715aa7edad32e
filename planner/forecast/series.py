"""Hourly series to forecast: from an ingested dataset's hourly counts, a ``ds,y`` CSV, or
ServeGen's rates file.

Every series is a complete grid of consecutive UTC hours. A value is either a measurement
(zero included: an hour in which nothing arrived is real demand) or missing (NaN): an hour
that was not collected. Missing hours are never interpolated; Prophet fits around them and
the backtest skips them. Zero hours stay zeros unless flagged as collection gaps
(:meth:`HourlySeries.with_gaps`, :meth:`HourlySeries.zeros_as_gaps`). Both kinds are
reported, as counts and ranges, in :class:`SeriesReport`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from planner.common.files import check_output_path, write_text_atomic
from planner.common.text import closest, shown
from planner.errors import InputFileError, NotFoundError, RowProblem, UsageError
from planner.workload.hourly_csv import (
    DS_EXAMPLE,
    csv_rows,
    ds_y_rows,
    parse_hour,
    read_text,
)

METRICS = ("requests", "input_tokens", "output_tokens")
HOUR_US = 3_600_000_000
HOUR = timedelta(hours=1)
# ServeGen's window_start_s counts from an unnamed midnight; planner puts it on a Monday.
SERVEGEN_START = datetime(2025, 1, 6, tzinfo=UTC)
SERVEGEN_COLUMNS = ("model", "window_start_s", "requests_in_window")
# An edge hour of a log is partial when the log starts (ends) later (earlier) than this into it.
EDGE_SLACK_US = 36_000_000
MISSING_TEXT = frozenset({"", "nan", "na", "null", "none"})
NEAR_ZERO_SHARE = 0.01

ZeroWindows = Literal["gap", "zero"]


def _utc(moment: datetime | pd.Timestamp) -> datetime:
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize(UTC) if stamp.tzinfo is None else stamp.tz_convert(UTC)
    result: datetime = stamp.to_pydatetime()
    return result


def iso_hour(moment: datetime | pd.Timestamp) -> str:
    """``2025-01-06T00:00:00Z``: how planner writes an hour."""
    return _utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class HourRange:
    """``hours`` consecutive hours from ``start`` (UTC)."""

    start: datetime
    hours: int

    @property
    def end(self) -> datetime:
        """The end, exclusive."""
        return self.start + self.hours * HOUR

    def describe(self) -> str:
        last = self.end - HOUR
        if self.hours == 1:
            return iso_hour(self.start)
        return f"{iso_hour(self.start)} to {iso_hour(last)} ({self.hours} h)"

    def to_dict(self) -> dict[str, Any]:
        return {"start": iso_hour(self.start), "end": iso_hour(self.end), "hours": self.hours}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HourRange:
        return cls(_utc(pd.Timestamp(data["start"])), int(data["hours"]))


def _ranges(ds: pd.Series, mask: NDArray[np.bool_]) -> tuple[HourRange, ...]:
    """Runs of True in ``mask`` as hour ranges."""
    if not mask.any():
        return ()
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    stops = np.flatnonzero(edges == -1)
    return tuple(
        HourRange(_utc(ds.iloc[int(a)]), int(b - a)) for a, b in zip(starts, stops, strict=True)
    )


@dataclass(frozen=True)
class SeriesReport:
    """What a series holds besides measurements: missing hours (collection gaps) and zeros."""

    hours: int
    observed_hours: int
    missing: tuple[HourRange, ...]
    zeros: tuple[HourRange, ...]
    notes: tuple[str, ...] = ()
    # Non-zero hours under 1% of the median hour: partial outages, more likely than real demand.
    near_zero: tuple[HourRange, ...] = ()

    @property
    def missing_hours(self) -> int:
        return sum(r.hours for r in self.missing)

    @property
    def zero_hours(self) -> int:
        return sum(r.hours for r in self.zeros)

    def lines(self, most: int = 5) -> list[str]:
        """Human-readable lines for the CLI."""

        def listed(ranges: tuple[HourRange, ...]) -> str:
            text = ", ".join(r.describe() for r in ranges[:most])
            more = len(ranges) - most
            return text + (f" and {more} more" if more > 0 else "")

        out = []
        if self.missing:
            out.append(
                f"{self.missing_hours} missing hour(s) in {len(self.missing)} gap(s), left out of "
                f"the fit (not interpolated): {listed(self.missing)}"
            )
        if self.zeros:
            out.append(
                f"{self.zero_hours} zero-rate hour(s) in {len(self.zeros)} run(s), kept as zeros "
                f"(flag them as gaps if they were collection outages): {listed(self.zeros)}"
            )
        if self.near_zero:
            out.append(
                f"{sum(r.hours for r in self.near_zero)} hour(s) under 1% of the median hour, "
                f"kept (a partial outage? flag with --gap START/END): {listed(self.near_zero)}"
            )
        out.extend(self.notes)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "hours": self.hours,
            "observed_hours": self.observed_hours,
            "missing_hours": self.missing_hours,
            "missing": [r.to_dict() for r in self.missing],
            "zero_hours": self.zero_hours,
            "zeros": [r.to_dict() for r in self.zeros],
            "near_zero": [r.to_dict() for r in self.near_zero],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SeriesReport:
        """A report as :meth:`to_dict` stored it (with a stored forecast)."""

        def ranges(key: str) -> tuple[HourRange, ...]:
            return tuple(HourRange.from_dict(r) for r in data.get(key) or [])

        return cls(
            hours=int(data["hours"]),
            observed_hours=int(data["observed_hours"]),
            missing=ranges("missing"),
            zeros=ranges("zeros"),
            notes=tuple(data.get("notes") or ()),
            near_zero=ranges("near_zero"),
        )


@dataclass(frozen=True)
class HourlySeries:
    """One metric per hour over consecutive hours.

    ``frame`` has columns ``ds`` (hour start, timezone-naive UTC, as Prophet wants it) and ``y``
    (float; NaN where the hour is missing).
    """

    frame: pd.DataFrame
    metric: str = "requests"
    source: str = "series"
    model: str | None = None
    dataset_id: int | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if list(self.frame.columns) != ["ds", "y"]:
            raise ValueError(f"a series frame has columns ds, y; got {list(self.frame.columns)}")
        if len(self.frame) == 0:
            raise ValueError("a series needs at least one hour")
        ds = pd.to_datetime(self.frame["ds"])
        if ds.dt.tz is not None:
            ds = ds.dt.tz_convert(UTC).dt.tz_localize(None)
        steps = ds.diff().iloc[1:]
        if len(steps) and not (steps == pd.Timedelta(hours=1)).all():
            raise ValueError("a series frame must hold consecutive hours")
        frame = pd.DataFrame(
            {"ds": ds.astype("datetime64[ns]"), "y": self.frame["y"].astype(np.float64)}
        ).reset_index(drop=True)
        object.__setattr__(self, "frame", frame)

    @property
    def start(self) -> datetime:
        return _utc(self.frame["ds"].iloc[0])

    @property
    def end(self) -> datetime:
        """The end of the last hour (exclusive)."""
        return _utc(self.frame["ds"].iloc[-1]) + HOUR

    @property
    def hours(self) -> int:
        return len(self.frame)

    @property
    def values(self) -> NDArray[np.float64]:
        values: NDArray[np.float64] = self.frame["y"].to_numpy(np.float64)
        return values

    @property
    def observed_hours(self) -> int:
        return int(np.isfinite(self.values).sum())

    @property
    def label(self) -> str:
        model = f", model {self.model}" if self.model else ""
        return f"{self.metric} per hour, {self.source}{model}"

    @property
    def report(self) -> SeriesReport:
        y = self.values
        observed = np.isfinite(y)
        median = float(np.median(y[observed])) if observed.any() else 0.0
        low = observed & (y > 0) & (y < NEAR_ZERO_SHARE * median)
        return SeriesReport(
            hours=self.hours,
            observed_hours=self.observed_hours,
            missing=_ranges(self.frame["ds"], ~observed),
            zeros=_ranges(self.frame["ds"], observed & (y == 0)),
            notes=self.notes,
            near_zero=_ranges(self.frame["ds"], low),
        )

    def head(self, hours: int) -> HourlySeries:
        """The first ``hours`` hours."""
        if not 0 < hours <= self.hours:
            raise ValueError(f"cannot take {hours} of {self.hours} hours")
        return replace(self, frame=self.frame.iloc[:hours].copy())

    def split(self, test_hours: int) -> tuple[HourlySeries, HourlySeries]:
        """(history, held-out last ``test_hours`` hours)."""
        if not 0 < test_hours < self.hours:
            raise ValueError(f"cannot hold out {test_hours} of {self.hours} hours")
        cut = self.hours - test_hours
        return (
            replace(self, frame=self.frame.iloc[:cut].copy()),
            replace(self, frame=self.frame.iloc[cut:].copy()),
        )

    def with_gaps(self, ranges: Iterable[tuple[datetime, datetime]]) -> HourlySeries:
        """The series with the hours in each ``[start, end)`` flagged as collection gaps."""
        y = self.values.copy()
        ds = self.frame["ds"]
        flagged = 0
        for start, end in ranges:
            lo = pd.Timestamp(_utc(start)).tz_localize(None)
            hi = pd.Timestamp(_utc(end)).tz_localize(None)
            if hi <= lo:
                raise UsageError(f"gap {iso_hour(start)}/{iso_hour(end)}: its end is not after it")
            inside = ((ds + pd.Timedelta(hours=1)) > lo) & (ds < hi)
            flagged += int(inside.sum())
            y[inside.to_numpy()] = np.nan
        note = f"{flagged} hour(s) flagged as collection gaps by the user"
        return replace(self, frame=pd.DataFrame({"ds": ds, "y": y}), notes=(*self.notes, note))

    def zeros_as_gaps(self) -> HourlySeries:
        """The series with every zero hour taken as a collection gap (missing)."""
        y = self.values.copy()
        zeros = np.isfinite(y) & (y == 0)
        y[zeros] = np.nan
        note = f"{int(zeros.sum())} zero hour(s) taken as collection gaps"
        return replace(
            self, frame=pd.DataFrame({"ds": self.frame["ds"], "y": y}), notes=(*self.notes, note)
        )

    def to_csv(self, path: Path | str) -> None:
        """Write as ``ds,y`` (missing hours as empty ``y``)."""
        write_hourly_csv(self.frame["ds"], self.values, path)


def write_hourly_csv(
    ds: Sequence[Any] | pd.Series,
    y: NDArray[np.float64],
    path: Path | str,
    option: str = "output",
) -> None:
    """A ``ds,y`` CSV, one row per hour, ``ds`` as ISO 8601 UTC (``...Z``), written whole or
    not at all (a failure is a :class:`UsageError` naming ``option``)."""
    path = Path(path)
    check_output_path(path, option)
    write_text_atomic(path, hourly_csv_text(ds, y), option)


def hourly_csv_text(ds: Sequence[Any] | pd.Series, y: NDArray[np.float64]) -> str:
    """The ``ds,y`` CSV text :func:`write_hourly_csv` writes (missing values as empty ``y``)."""
    lines = ["ds,y"]
    for moment, value in zip(ds, y, strict=True):
        text = "" if not math.isfinite(value) else f"{value:.6g}" if value < 1e6 else f"{value:.0f}"
        lines.append(f"{iso_hour(moment)},{text}")
    return "\n".join(lines) + "\n"


def _grid(start: pd.Timestamp, hours: int) -> pd.DatetimeIndex:
    return pd.date_range(start, periods=hours, freq="h")


# --- from a dataset's hourly counts ----------------------------------------------------------


def series_from_hours(
    name: str,
    table: pd.DataFrame,
    first_us: int | None,
    last_us: int | None,
    *,
    dataset_id: int | None = None,
    metric: str = "requests",
    model: str | None = None,
) -> HourlySeries:
    """The hourly ``metric`` of dataset ``name`` (one ``model``'s, or all models' summed), from
    its requests summed per (hour, model) (``table``: ``hour`` since the epoch, ``model``, and
    the metrics) and its first and last arrival (microseconds since the epoch).

    Hours inside the log's span with no requests are zeros. The first and last hours are partial
    when the log starts or ends well inside them (more than 36 s); they become missing values,
    since a partial count would read as a drop in load.
    """
    check_metric(metric)
    if table.empty or first_us is None or last_us is None:
        raise UsageError(f"dataset {shown(name)} has no requests to forecast")
    models = sorted({m for m in table["model"] if m is not None})
    notes: list[str] = []
    if model is not None:
        picked = _log_names_of(model, table, models)
        if not picked:
            known = closest(model, models) if models else "none (the log names no models)"
            raise NotFoundError(
                f"dataset {shown(name)} has no model {shown(model)} (as logged, or a catalog "
                f"model one of its names maps to); its models: {known}"
            )
        if picked != [model]:
            notes.append(
                f"--model {model}: the log's requests of {', '.join(picked)} (catalog model "
                f"{_catalog_of(model)})"
            )
        table = table[table["model"].isin(picked)]
    elif len(models) > 1:
        notes.append(f"all {len(models)} models summed ({', '.join(models)}); --model picks one")
    per_hour = table.groupby("hour")[metric].sum()
    first_hour, last_hour = int(per_hour.index.min()), int(per_hour.index.max())
    hours = last_hour - first_hour + 1
    y = np.zeros(hours)
    y[per_hour.index.to_numpy() - first_hour] = per_hour.to_numpy()

    if first_us - first_hour * HOUR_US > EDGE_SLACK_US:
        y[0] = np.nan
        notes.append(
            f"first hour {iso_hour(_from_hour(first_hour))} is partial (the log starts at "
            f"{_from_us(first_us).isoformat()}): left out"
        )
    if (last_hour + 1) * HOUR_US - last_us > EDGE_SLACK_US and (hours > 1 or not np.isnan(y[0])):
        y[-1] = np.nan
        notes.append(
            f"last hour {iso_hour(_from_hour(last_hour))} is partial (the log ends at "
            f"{_from_us(last_us).isoformat()}): left out"
        )
    start = pd.Timestamp(_from_hour(first_hour)).tz_localize(None)
    return HourlySeries(
        pd.DataFrame({"ds": _grid(start, hours), "y": y}),
        metric=metric,
        source=f"dataset {name}",
        model=model,
        dataset_id=dataset_id,
        notes=tuple(notes),
    )


def _catalog_of(model: str) -> str | None:
    """The canonical catalog name of ``model`` (a name or alias), None if it is none."""
    from planner.workload.model_names import catalog_model_of

    return catalog_model_of(model)


def _log_names_of(model: str, table: pd.DataFrame, models: list[str]) -> list[str]:
    """The log's model names ``--model`` picks: the exact name as logged, else every name that
    maps to the same catalog model (``--model llama-3.1-8b`` finds
    ``meta-llama/Llama-3.1-8B-Instruct``; see planner.workload.model_names)."""
    if model in models:
        return [model]
    from planner.workload.model_names import resolve_models

    wanted = _catalog_of(model)
    if wanted is None:
        return []
    counts = table.groupby("model")["requests"].sum() if "requests" in table else None
    resolution = resolve_models(
        {m: int(counts[m]) if counts is not None else 1 for m in models}, unmapped="skip"
    )
    return sorted(n for n in resolution.log_names(wanted) if n is not None)


def _from_hour(hour: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + hour * HOUR


def _from_us(micros: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


def check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise UsageError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")


# --- from files ------------------------------------------------------------------------------


def read_series(
    path: Path | str, *, model: str | None = None, zero_windows: ZeroWindows = "gap"
) -> HourlySeries:
    """An hourly series from a CSV: ``ds,y`` (see :func:`read_series_csv`), or ServeGen's rates
    file (columns model, window_start_s, ..., requests_in_window; see :func:`read_servegen`),
    told apart by the header."""
    path = Path(path)
    text = read_text(path, "a CSV with columns ds,y")
    header = next(iter(csv_rows(path, text)), None)
    names = {h.strip().lower() for h in header[2]} if header else set()
    if set(SERVEGEN_COLUMNS) <= names:
        return read_servegen(path, model=model, zero_windows=zero_windows)
    if model is not None:
        raise UsageError(
            f"--model {shown(model)}: {path} is a ds,y series of one model; --model applies to "
            "datasets and ServeGen rate files"
        )
    return read_series_csv(path)


def read_series_csv(path: Path | str, metric: str = "requests") -> HourlySeries:
    """An hourly series from a CSV with columns ``ds`` (hour start, ISO 8601, naive = UTC) and
    ``y`` (the metric in that hour), one row per hour in increasing order.

    Hours skipped between rows are collection gaps (missing), as are rows whose ``y`` is empty
    or ``NaN``; both are reported. Anything else that is not a non-negative number, an ``ds``
    that is not an hour start, or hours out of order are errors naming the row, line and column.
    """
    path = Path(path)
    text = read_text(path, "a CSV with columns ds,y")
    moments: list[datetime] = []
    values: list[float] = []
    for row, line, ds_text, y_text in ds_y_rows(path, text):
        moment = _parse_hour(path, ds_text, row, line)
        if moments and moment <= moments[-1]:
            what = "repeats" if moment == moments[-1] else "is before"
            raise InputFileError(
                path,
                RowProblem(
                    row,
                    "ds",
                    f"{shown(ds_text.strip())} {what} the previous row's hour "
                    f"{iso_hour(moments[-1])}; expected hours in increasing order, one row each",
                    line,
                ),
            )
        moments.append(moment)
        values.append(_parse_value(path, y_text, row, line))
    if not moments:
        raise InputFileError(
            path, "no data rows; expected at least one row of ds,y under the header"
        )
    start = pd.Timestamp(moments[0]).tz_localize(None)
    hours = int((moments[-1] - moments[0]) / HOUR) + 1
    y = np.full(hours, np.nan)
    index = np.array([int((m - moments[0]) / HOUR) for m in moments])
    y[index] = values
    skipped = hours - len(moments)
    notes = (f"{skipped} hour(s) have no row in the file: missing",) if skipped else ()
    return HourlySeries(
        pd.DataFrame({"ds": _grid(start, hours), "y": y}),
        metric=metric,
        source=f"file {path.name}",
        notes=notes,
    )


def _parse_hour(path: Path, text: str, row: int, line: int) -> datetime:
    """An hour start: a date-time (see :func:`parse_hour`) on a whole hour."""
    moment = parse_hour(path, text, row, line)
    value = text.strip()
    hint = f"expected an ISO 8601 hour start like {DS_EXAMPLE}"
    if moment.minute or moment.second or moment.microsecond:
        raise InputFileError(
            path,
            RowProblem(row, "ds", f"{shown(value)} is not the start of an hour; {hint}", line),
        )
    return moment


def _parse_value(path: Path, text: str, row: int, line: int) -> float:
    value = text.strip()
    if value.lower() in MISSING_TEXT:
        return math.nan  # a flagged collection gap
    expected = "expected a non-negative number, or empty/NaN for a missing hour"
    try:
        number = float(value)
    except ValueError:
        raise InputFileError(
            path, RowProblem(row, "y", f"{shown(value)}: {expected}", line)
        ) from None
    if not math.isfinite(number) or number < 0:
        raise InputFileError(path, RowProblem(row, "y", f"{shown(value)}: {expected}", line))
    return number


def read_servegen(
    path: Path | str,
    *,
    model: str | None = None,
    start: datetime = SERVEGEN_START,
    zero_windows: ZeroWindows = "gap",
) -> HourlySeries:
    """Requests per hour from ServeGen's aggregated rates file (alibaba/ServeGen).

    Columns ``model``, ``window_start_s`` (seconds since an unnamed midnight; planner puts
    ``t=0`` at ``start``, by default 2025-01-06 00:00 UTC, a Monday, so weekdays are
    consistent but not the real ones) and ``requests_in_window``; hours sum their windows.

    A zero window is a collection gap by default (``zero_windows="gap"``; the data's README says
    they probably are): an hour with any gap window, or missing windows, is missing as a whole,
    since a partial sum would read as a drop in load. ``zero_windows="zero"`` keeps them as
    zero demand. ``model=None`` sums all models (an hour missing in one is missing in the sum).
    """
    path = Path(path)
    text = read_text(path, "ServeGen's rates CSV")
    header: list[str] | None = None
    cols: dict[str, int] = {}
    records: list[tuple[str, float, float]] = []
    for row, line, fields in csv_rows(path, text):
        if header is None:
            header = [f.strip().lower() for f in fields]
            for column in SERVEGEN_COLUMNS:
                if column not in header:
                    raise InputFileError(
                        path,
                        RowProblem(
                            None,
                            column,
                            "missing column; expected ServeGen's header "
                            "model,window_start_s,total_rate_rps,requests_in_window",
                            line,
                        ),
                    )
            cols = {c: header.index(c) for c in SERVEGEN_COLUMNS}
            continue
        if len(fields) != len(header):
            raise InputFileError(
                path,
                RowProblem(row, None, f"{len(fields)} fields, expected {len(header)}", line),
            )
        name = fields[cols["model"]].strip()
        if not name:
            raise InputFileError(path, RowProblem(row, "model", "empty; expected a name", line))
        window = _number(path, fields[cols["window_start_s"]], row, line, "window_start_s")
        count = _number(path, fields[cols["requests_in_window"]], row, line, "requests_in_window")
        records.append((name, window, count))
    if not records:
        raise InputFileError(path, "no data rows; expected ServeGen rate windows")
    frame = pd.DataFrame(records, columns=["model", "window_s", "requests"])
    models = sorted(frame["model"].unique())
    notes = [
        f"ServeGen time 0 taken as {iso_hour(start)} "
        f"({start.strftime('%A')}); the trace's real dates are unknown"
    ]
    if model is not None:
        if model not in models:
            raise NotFoundError(
                f"{path}: no model {shown(model)}; its models: {closest(model, models)}"
            )
        frame = frame[frame["model"] == model]
    elif len(models) > 1:
        notes.append(f"all {len(models)} models summed ({', '.join(models)}); --model picks one")

    per_model: list[pd.Series] = []
    gap_windows = 0
    for _name, part in frame.groupby("model"):
        part = part.sort_values("window_s")
        steps = np.diff(part["window_s"].to_numpy())
        window_s = float(np.min(steps[steps > 0])) if (steps > 0).any() else 3600.0
        per_hour_expected = max(1, round(3600 / window_s))
        hour = (part["window_s"] // 3600).astype(np.int64)
        gap = part["requests"] == 0 if zero_windows == "gap" else pd.Series(False, part.index)
        gap_windows += int(gap.sum())
        grouped = pd.DataFrame({"hour": hour, "y": part["requests"], "gap": gap}).groupby("hour")
        sums = grouped["y"].sum()
        bad = grouped["gap"].any() | (grouped["y"].count() < per_hour_expected)
        per_model.append(sums.where(~bad))
    combined = pd.concat(per_model, axis=1)
    # A sum over models is missing where any model's hour is (min_count keeps NaN).
    total = combined.sum(axis=1, min_count=combined.shape[1])
    first, last = int(total.index.min()), int(total.index.max())
    y = np.full(last - first + 1, np.nan)
    y[total.index.to_numpy() - first] = total.to_numpy()
    if gap_windows:
        notes.append(
            f"{gap_windows} zero-rate 10-minute window(s) taken as collection gaps: "
            "their hours are missing"
        )
    origin = pd.Timestamp(_utc(start)).tz_localize(None) + pd.Timedelta(hours=first)
    return HourlySeries(
        pd.DataFrame({"ds": _grid(origin, len(y)), "y": y}),
        metric="requests",
        source=f"ServeGen {path.name}",
        model=model,
        notes=tuple(notes),
    )


def _number(path: Path, text: str, row: int, line: int, column: str) -> float:
    value = text.strip()
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        what = shown(value) if value else "empty"
        raise InputFileError(
            path, RowProblem(row, column, f"{what}: expected a non-negative number", line)
        )
    return number
