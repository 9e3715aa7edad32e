"""Loading what a simulation needs from the store, as values: shared by the use cases that
simulate (``planner.usecases.simulate``, and the recommendation's verification runs).

Each function takes an open :class:`~sqlalchemy.orm.Session` (a use case opens it through its
``sessions`` scope after checking its request) and returns values the pure core takes:

- :func:`from_dataset`: a stored dataset's requests replayed, as a
  :class:`~planner.simulate.workload.Workload` (optionally a window, at a load scale);
- :func:`dataset_models`: a dataset's model names as logged, mapped to catalog models;
- :func:`token_pool`: a dataset's (input, output) token counts, to draw synthetic lengths from;
- :func:`pick_models`: which of a dataset's requests are one model's (a log of several);
- :func:`workload_for`: the workload a :class:`~planner.simulate.inputs.DemandSource` describes
  (either of the above, or arrivals on a rate curve);
- :func:`stored_demand`: a stored forecast's demand curve (a
  :class:`~planner.workload.rates.RateCurve`);
- :func:`instance_prices`: the price sheet's instance types for a GPU, priced per replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.orm import Session

from planner.common.text import printable, shown
from planner.errors import UsageError
from planner.simulate.inputs import DemandSource, InstancePrices, sheet_instances
from planner.simulate.workload import (
    EPOCH,
    Workload,
    check_request_count,
    from_micros,
    prefix_block_tokens_of,
    replayed,
    synthetic,
)
from planner.store.queries import get_dataset
from planner.store.requests import (
    REPLAY_COLUMNS,
    model_counts,
    request_frame,
    request_span,
    token_pairs,
)
from planner.workload.model_names import ModelResolution, resolve_models, shown_name
from planner.workload.rates import RateCurve, read_rate_curve

# --- a stored dataset's requests ----------------------------------------------------------------


def dataset_models(
    session: Session,
    name: str,
    *,
    model_map: Mapping[str, str] | None = None,
    unmapped: str = "error",
    default: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    api_model_of: Callable[[str], str | None] | None = None,
    substitutes: Mapping[str, str] | None = None,
) -> ModelResolution:
    """Dataset ``name``'s model names as logged (its requests in ``[start, end)`` when given),
    mapped to catalog models (:func:`~planner.workload.model_names.resolve_models`: ``model_map``
    first, ``default`` for a log that names no model, ``unmapped`` names an error or left out;
    ``api_model_of`` tells proprietary models, ``substitutes`` serve catalog models in their
    place)."""
    dataset = get_dataset(session, name)
    start_us = None if start is None else _micros(start, "start")
    end_us = None if end is None else _micros(end, "end")
    counts = model_counts(session, dataset.id, start_us, end_us)
    return resolve_models(
        counts,
        model_map=model_map,
        unmapped=unmapped,
        default=default,
        source=f"dataset {shown(name)}",
        api_model_of=api_model_of,
        substitutes=substitutes,
    )


def _models_text(log_models: Sequence[str | None]) -> str:
    return ", ".join(shown_name(m) for m in log_models) or "(none)"


def from_dataset(
    session: Session,
    name: str,
    *,
    load_scale: float = 1.0,
    start: datetime | None = None,
    end: datetime | None = None,
    seed: int = 0,
    max_requests: int | None = None,
    log_models: Sequence[str | None] | None = None,
) -> Workload:
    """The requests of dataset ``name`` (optionally those in ``[start, end)``, and only those
    whose model as logged is one of ``log_models``: see :func:`dataset_models`) at
    ``load_scale``.

    Time zero is ``start`` when given, otherwise the (kept) requests' first arrival. More than
    ``max_requests`` requests (the window's count times ``load_scale``) is an error, raised
    before any request is read.
    """
    if not (math.isfinite(load_scale) and load_scale > 0):
        raise UsageError(
            f"--load-scale must be a positive number (1 replays the log as it is), got {load_scale}"
        )
    start_us = None if start is None else _micros(start, "start")
    end_us = None if end is None else _micros(end, "end")
    if start is not None and end is not None and end <= start:
        raise UsageError(
            f"the window end {end.isoformat()} is not after its start {start.isoformat()}"
        )
    dataset = get_dataset(session, name)
    span = request_span(session, dataset.id, start_us, end_us, log_models=log_models)
    of_models = "" if log_models is None else f" of model {_models_text(log_models)}"
    if not span.count or span.first_us is None or span.last_us is None:
        raise UsageError(f"dataset {shown(name)} has no requests{of_models}")
    check_request_count(
        span.inside * load_scale,
        max_requests,
        f"dataset {shown(name)}: {span.inside:,} requests{of_models} at --load-scale "
        f"{load_scale:g}",
    )
    frame = request_frame(
        session,
        dataset.id,
        REPLAY_COLUMNS,
        start_us=start_us,
        end_us=end_us,
        log_models=log_models,
    )
    if frame.empty:
        raise UsageError(
            f"dataset {shown(name)} has no requests{of_models} in the window from "
            f"{_when(start) or 'its start'} to {_when(end) or 'its end'} "
            f"(its requests arrive from {_when(from_micros(span.first_us))} "
            f"to {_when(from_micros(span.last_us))})"
        )
    zero_us = span.first_us if start_us is None else start_us
    workload = replayed(frame, zero_us, name, prefix_block_tokens_of(dataset.options))
    if load_scale == 1.0:
        return workload
    count = span.count
    mean_gap_s = (span.last_us - span.first_us) / 1e6 / (count - 1) if count > 1 else 0.0
    scaled = workload.scaled(load_scale, seed, mean_gap_s=mean_gap_s)
    if not len(scaled):
        raise UsageError(
            f"--load-scale {load_scale} kept none of the {len(workload)} requests of dataset "
            f"{shown(name)}; use a larger scale"
        )
    return scaled


def token_pool(
    session: Session, name: str, log_models: Sequence[str | None] | None = None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The (input, output) token counts of dataset ``name``'s requests (only those whose model
    as logged is one of ``log_models`` when given), in arrival order."""
    dataset = get_dataset(session, name)
    pairs = token_pairs(session, dataset.id, log_models=log_models)
    if not len(pairs):
        of_models = "" if log_models is None else f" of model {_models_text(log_models)}"
        raise UsageError(
            f"dataset {shown(name)} has no requests{of_models} to draw token lengths from"
        )
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


def _micros(moment: datetime, which: str) -> int:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise UsageError(
            f"the window {which} {moment.isoformat()} has no time zone; "
            "give it with an offset, e.g. 2024-06-01T00:00:00+00:00"
        )
    return (moment - EPOCH) // timedelta(microseconds=1)


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


# --- the workload a run describes ---------------------------------------------------------------


@dataclass(frozen=True)
class ModelPick:
    """The requests of one catalog model a run takes from a dataset that logs several: the
    dataset, how it is used (``replayed``, or ``token lengths`` drawn from it), the model, the
    log names of its requests (None: every request is the model's, no filter) and the whole
    log's resolution (what else it holds, what was left out)."""

    dataset: str
    use: str
    model: str
    log_models: list[str | None] | None
    resolution: ModelResolution

    @property
    def names(self) -> list[str | None]:
        """The log names whose requests the run takes."""
        return self.resolution.log_names(self.model)

    def to_dict(self) -> dict[str, object]:
        taken = self.resolution.requests_of(self.model)
        return {
            "dataset": self.dataset,
            "use": self.use,
            "model": self.model,
            "log_names": self.names,
            "requests": taken,
            "log_requests": self.resolution.total,
            "share": taken / self.resolution.total if self.resolution.total else 0.0,
            "skipped": [{"log_name": n, "requests": c} for n, c in self.resolution.skipped.items()],
            "skipped_requests": self.resolution.skipped_requests,
            "skipped_share": self.resolution.skipped_share,
        }

    def notes(self) -> list[str]:
        """The run's notes: which log names it took, and what was left out."""
        if self.log_models is None and not self.resolution.skipped:
            return []
        taken = self.resolution.requests_of(self.model)
        total = self.resolution.total
        share = f"{taken / total:.1%}" if total else "0.0%"
        notes = [
            f"dataset {printable(self.dataset)} {self.use}: only the {taken:,} of {total:,} "
            f"requests ({share}) of {self.model}, logged as {_models_text(self.names)}"
        ]
        skipped = self.resolution.skipped_note()
        if skipped is not None:
            notes.append(f"dataset {printable(self.dataset)}: {skipped} (--unmapped skip)")
        return notes


def pick_models(session: Session, demand: DemandSource, model: str) -> ModelPick | None:
    """Which requests of ``demand``'s dataset are model ``model``'s (a catalog name or alias):
    the replayed dataset's always (a log without a model column is all ``model``'s), the
    ``tokens_from`` dataset's only when it logs several models (one model's lengths serve any
    model, as before). None: no dataset, or lengths drawn from a log of one model.
    ``demand.model_map`` and ``demand.unmapped`` say how log names map (see
    :func:`dataset_models`)."""
    name = demand.dataset if demand.dataset is not None else demand.tokens_from
    if name is None:
        return None
    replay = demand.dataset is not None
    if not replay:
        counts = model_counts(session, get_dataset(session, name).id)
        if len([n for n in counts if n]) <= 1:
            return None
    resolution = dataset_models(
        session,
        name,
        model_map=demand.model_map,
        unmapped=demand.unmapped,
        default=model,
        start=demand.start if replay else None,
        end=demand.end if replay else None,
    )
    if not resolution.total:
        return None  # no request in the window: from_dataset says so, with the log's span
    if not replay and len(resolution.models()) <= 1 and not resolution.skipped:
        return None
    wanted = resolution.only(model)
    names = wanted.log_names(wanted.models()[0])
    # every request the model's: read them all, as a log of one model always was
    whole = set(names) == set(resolution.counts)
    return ModelPick(
        name,
        "replayed" if replay else "token lengths",
        wanted.models()[0],
        None if whole else names,
        resolution,
    )


def workload_for(
    session: Session,
    demand: DemandSource,
    *,
    seed: int = 0,
    max_requests: int | None = None,
    log_models: Sequence[str | None] | None = None,
) -> Workload:
    """The requests ``demand`` describes (a stored dataset replayed, or arrivals on a rate
    curve with a dataset's request lengths; only the requests whose model as logged is one of
    ``log_models`` when given, see :func:`pick_models`); more than ``max_requests`` is refused
    before any is read or drawn."""
    if demand.dataset is not None:
        return from_dataset(
            session,
            demand.dataset,
            load_scale=demand.load_scale,
            start=demand.start,
            end=demand.end,
            seed=seed,
            max_requests=max_requests,
            log_models=log_models,
        )
    if demand.rates is None:
        raise UsageError("give exactly one of --dataset (replay) or --rates (synthetic arrivals)")
    if demand.tokens_from is None:
        raise UsageError("--rates needs --tokens-from DATASET for request lengths")
    rates = demand.rates
    curve = read_rate_curve(rates) if isinstance(rates, Path) else rates
    label = demand.rates_label or str(rates)
    inputs, outputs = token_pool(session, demand.tokens_from, log_models)
    workload = synthetic(
        curve,
        inputs,
        outputs,
        seed=seed,
        cv=demand.cv,
        max_requests=max_requests,
        constant=demand.constant_rate,
    )
    if not len(workload):
        raise UsageError(
            f"the rate curve {shown(label)} asks for {curve.total_requests:g} "
            f"requests in all over {curve.hours:,} hour(s), and none arrived with seed "
            f"{seed}"
            + (f" and --cv {demand.cv:g}" if demand.cv != 1.0 else "")
            + "; give higher rates"
        )
    return workload


# --- demand curves from stored forecasts --------------------------------------------------------


@dataclass(frozen=True)
class StoredDemand:
    """A stored forecast's demand curve (requests per hour at its demand quantile)."""

    curve: RateCurve
    label: str  # e.g. "forecast #1 at q0.9 (ServeGen ...)"
    dataset: str | None  # the dataset it was fitted on, if stored: its lengths by default
    model: str | None = None  # the log's model it forecasts (None: every model summed)


def stored_demand(session: Session, forecast_id: int) -> StoredDemand:
    """The demand curve stored with forecast ``forecast_id`` (``planner forecast``)."""
    # the forecast modules load the forecasting libraries: only when a forecast is asked for
    from planner.forecast.demand import rate_curve
    from planner.store.forecasts import load_forecast, points_frame
    from planner.store.models import Dataset

    run = load_forecast(session, forecast_id)
    frame = points_frame(run)
    if frame.empty or frame["demand"].isna().any():
        raise UsageError(f"forecast #{run.id} has no demand curve stored; rerun `planner forecast`")
    curve = rate_curve(frame.rename(columns={"demand": "y"})[["ds", "y"]])
    dataset = session.get(Dataset, run.dataset_id) if run.dataset_id is not None else None
    return StoredDemand(
        curve,
        f"forecast #{run.id} at q{run.demand_quantile:g} ({run.source})",
        dataset.name if dataset is not None else None,
        run.model,
    )


# --- prices per replica-hour from the price sheet -----------------------------------------------


def instance_prices(
    session: Session, gpu: str, tp: int = 1, term_years: int = 1
) -> list[InstancePrices]:
    """The latest price sheet's instance types with ``gpu`` that hold whole replicas of ``tp``
    GPUs, priced per purchase group (:func:`~planner.simulate.inputs.sheet_instances`),
    cheapest on-demand per GPU first."""
    from pricing.sheets import latest_prices

    return sheet_instances(latest_prices(session, gpu=gpu), tp, term_years)
