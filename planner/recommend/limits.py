"""What a recommendation reads from the store before it searches: the demand (an ingested
dataset's requests, a stored forecast's demand curve, or a demand-curve CSV, with the request
lengths drawn from a dataset), the limit on what one simulated window may hold, the prices and
the calibration profiles.

``planner recommend`` and the dashboard's Recommendations page both build their search from
here, so the same input gives the same demand and the same refusals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.common.text import printable
from planner.errors import UsageError
from planner.latency.profile import Profile
from planner.latency.registry import all_profiles
from planner.recommend.inputs import Constraints, Demand
from planner.recommend.sweep import peak_window
from planner.simulate.workload import HOUR_S, RateCurve, from_dataset, read_rate_curve, token_pool
from planner.store.models import Request as RequestRow
from planner.store.queries import get_dataset
from pricing.model import PricePoint
from pricing.sheets import check_filters, ensure_list_prices, latest_prices

# Most requests one simulated verification window may hold (``--max-requests``): the simulator
# replays ~10,000 requests a second on one core, and a recommendation runs dozens of
# simulations of the peak window (up to twice its load in the growth check).
DEFAULT_MAX_REQUESTS = 1_000_000
SIMULATED_REQUESTS_PER_S = 10_000  # one core, for the estimate in the refusal
REPLAY_WINDOWS = 20  # a replayed dataset, held whole in memory: up to 20 x --max-requests


@dataclass(frozen=True)
class LimitNames:
    """How a refusal names the settings a user can change: the CLI's options by default."""

    load_scale: str = "--load-scale"
    verify_hours: str = "--verify-hours"
    max_requests: str = "--max-requests"
    window: str = "pick a window with --start/--end"


CLI_NAMES = LimitNames()


class WindowLimit:
    """What the machine can simulate: the requests of the verification window (the peak
    ``verify_hours``), which every one of a recommendation's dozens of simulations replays."""

    def __init__(
        self,
        max_requests: int,
        verify_hours: int,
        load_scale: float,
        names: LimitNames = CLI_NAMES,
    ) -> None:
        self.max_requests = max_requests
        self.verify_hours = verify_hours
        self.load_scale = load_scale
        self.names = names

    def _refuse(self, requests: float, what: str) -> UsageError:
        n = self.names
        minutes = requests / SIMULATED_REQUESTS_PER_S / 60
        scale = f" at {n.load_scale} {self.load_scale:g}" if self.load_scale != 1 else ""
        return UsageError(
            f"{what}{scale} holds {requests:,.0f} requests, more than {n.max_requests} "
            f"{self.max_requests:,}: each of the recommendation's dozens of simulations would "
            f"replay them (about {minutes:,.0f} minutes each on one core). Lower {n.load_scale} "
            f"or {n.verify_hours}, or raise {n.max_requests} to run it anyway"
        )

    def check(self, demand: Demand) -> None:
        """Refuse a demand whose verification window is too big to simulate."""
        rates = demand.curve.requests_per_hour
        first, last = peak_window(rates, self.verify_hours)
        requests = float(rates[first:last].sum())
        if requests > self.max_requests:
            hours = last - first
            raise self._refuse(
                requests, f"the demand's busiest {hours} hour{'s' if hours > 1 else ''}"
            )

    def check_replay(
        self,
        session: Session,
        name: str,
        window: tuple[datetime | None, datetime | None],
        load_scale: float,
    ) -> None:
        """Before a dataset is read and scaled: its busiest hours and its size at the scale
        (a replay is held whole in memory)."""
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
            return  # from_dataset says what is missing
        zero = _micros(window[0]) if window[0] is not None else int(first)
        hour = (RequestRow.arrival_us - zero) // int(HOUR_S * 1_000_000)
        counts = session.execute(select(hour, func.count()).where(*where).group_by(hour)).all()
        rates = np.zeros(int(max(h for h, _ in counts)) + 1)
        for h, n in counts:
            rates[int(h)] = n
        first_hour, last_hour = peak_window(rates, self.verify_hours)
        requests = float(rates[first_hour:last_hour].sum()) * load_scale
        if requests > self.max_requests:
            hours = last_hour - first_hour
            raise self._refuse(
                requests, f"dataset {name!r}'s busiest {hours} hour{'s' if hours > 1 else ''}"
            )
        if load_scale > 1 and total * load_scale > REPLAY_WINDOWS * self.max_requests:
            said = self.names
            raise UsageError(
                f"{said.load_scale} {load_scale:g} makes dataset {name!r} "
                f"{total * load_scale:,.0f} requests to hold in memory, more than "
                f"{REPLAY_WINDOWS} x {said.max_requests} "
                f"({REPLAY_WINDOWS * self.max_requests:,}); {said.window}, lower "
                f"{said.load_scale}, or raise {said.max_requests}"
            )


def _micros(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def check_load_scale(load_scale: float, name: str = "--load-scale") -> None:
    """A load scale is a positive, finite multiple of the load."""
    if not (math.isfinite(load_scale) and load_scale > 0):
        raise UsageError(
            f"{name} {load_scale:g}: expected a positive number (1: the load as it is, 1.5: 50% "
            "more)"
        )


def dataset_demand(
    session: Session,
    name: str,
    *,
    load_scale: float = 1.0,
    window: tuple[datetime | None, datetime | None] = (None, None),
    seed: int = 0,
    limit: WindowLimit | None = None,
) -> Demand:
    """The demand of an ingested dataset: its requests, replayed (lengths included)."""
    if limit is not None:
        limit.check_replay(session, name, window, load_scale)
    workload = from_dataset(
        session, name, load_scale=load_scale, start=window[0], end=window[1], seed=seed
    )
    scale = f" x {load_scale:g}" if load_scale != 1 else ""
    return Demand.from_workload(workload, f"dataset {name}{scale}")


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
    from planner.simulate.inputs import stored_demand

    stored = stored_demand(session, forecast_id)
    curve = RateCurve(stored.curve.start, stored.curve.requests_per_hour * load_scale)
    source = stored.label
    if tokens_from is None:
        if stored.dataset is None:
            raise UsageError(
                f"forecast #{forecast_id} was not fitted on a stored dataset: give "
                f"{tokens_option} DATASET for the request lengths"
            )
        tokens_from = stored.dataset
    inputs, outputs = token_pool(session, tokens_from)
    return Demand(curve, inputs, outputs, source)


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


def demand_for(
    session: Session,
    *,
    dataset: str | None = None,
    forecast_id: int | None = None,
    csv: Path | str | None = None,
    tokens_from: str | None = None,
    load_scale: float = 1.0,
    window: tuple[datetime | None, datetime | None] = (None, None),
    seed: int = 0,
    limit: WindowLimit | None = None,
    names: Mapping[str, str] | None = None,
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
            session, dataset, load_scale=load_scale, window=window, seed=seed, limit=limit
        )
    if window != (None, None):
        raise UsageError("a window picks requests of a dataset; a demand curve is planned whole")
    if forecast_id is not None:
        return forecast_demand(
            session, forecast_id, tokens_from, load_scale, tokens_option=said["tokens_from"]
        )
    assert csv is not None
    return curve_demand(session, csv, tokens_from, load_scale, tokens_option=said["tokens_from"])


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
    return latest_prices(session), all_profiles(session)
