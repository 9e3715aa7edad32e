"""Report: the finance report of a stored recommendation (``planner report`` and the
dashboard's Reports page).

:func:`build_report` checks the :class:`ReportRequest`, reads everything the report needs from
the store at once (the recommendation, the prices in force for its instance and their price
sheets, the forecast behind its demand, the calibration profile of its latency), computes the
report on those values (:func:`planner.report.api_report.build_with_api`: the instances' report
of :func:`planner.report.build.build`, with the per-token API pools the plan buys) and sets the
actual spend against it when asked. Both shells parse a month with :func:`parse_month`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime

from sqlalchemy.orm import Session

from planner.access import Action, require
from planner.common.text import shown
from planner.errors import NotFoundError, UsageError
from planner.latency.profile import ProfileError
from planner.latency.registry import profile_accuracy, resolve_profile
from planner.report.api import base_fleet
from planner.report.api_report import build_with_api
from planner.report.build import (
    Calibration,
    DemandForecast,
    PriceSheet,
    ReportInputs,
    SheetPrice,
    Stored,
    check_options,
    forecast_id,
    stored_recommendation,
)
from planner.report.export import ActualSources, with_actuals
from planner.report.fleet import FleetReportInputs, build_fleet, is_fleet, stored_fleet
from planner.report.model import Report
from planner.store.calibrations import known_profiles, stored_accuracy
from planner.store.forecasts import load_forecast, points_frame
from planner.store.recommendations import load_recommendation
from planner.usecases import SessionScope
from planner.usecases.audit import record
from pricing.sheets import get_version, latest_entries

MONTH = re.compile(r"(\d{4})-(\d{2})")
FIRST_YEAR, LAST_YEAR = 2000, 2100  # the months a plan can start in


def parse_month(text: str | None, option: str = "--first-month") -> date | None:
    """``YYYY-MM`` as the first day of that month, from 2000-01 to 2100-12; ``option`` names
    the field in an error."""
    if text is None:
        return None
    found = MONTH.fullmatch(text.strip())
    if found is None or not 1 <= int(found.group(2)) <= 12:
        raise UsageError(f"{option} {shown(text)}: expected a month as YYYY-MM, e.g. 2027-01")
    if not FIRST_YEAR <= int(found.group(1)) <= LAST_YEAR:
        raise UsageError(
            f"{option} {shown(text)}: out of range; expected a month from {FIRST_YEAR}-01 to "
            f"{LAST_YEAR}-12"
        )
    return date(int(found.group(1)), int(found.group(2)), 1)


@dataclass(frozen=True)
class ReportRequest:
    """A report of stored recommendation ``recommendation_id``: ``months`` months from
    ``first_month`` (default: the month after ``built_at``, default now), with the savings
    against ``current_fleet_monthly_usd`` when given and the actual spend from ``actuals``."""

    recommendation_id: int
    months: int = 12
    first_month: date | None = None
    current_fleet_monthly_usd: float | None = None
    built_at: datetime | None = None
    actuals: ActualSources = field(default_factory=ActualSources)


def build_report(request: ReportRequest, sessions: SessionScope) -> Report:
    """The finance report ``request`` asks for (see :func:`planner.report.build.build`), with
    the actual spend set against it when ``request.actuals`` names a source: every source is
    read before the report is returned, so a failure leaves nothing half-made.

    Raises :class:`~planner.errors.UsageError` for bad options (before the store is opened),
    :class:`~planner.errors.NotFoundError` for an unknown id and
    :class:`~planner.errors.PlannerError` for a recommendation without a fleet or whose
    instance has no price in force.
    """
    check_options(request.months, request.current_fleet_monthly_usd)
    with sessions() as session:
        if session is None:
            raise NotFoundError(
                f"no stored recommendation #{request.recommendation_id}: there is no store"
            )
        inputs = _load(session, request.recommendation_id)
    months, first, current = request.months, request.first_month, request.current_fleet_monthly_usd
    if isinstance(inputs, FleetReportInputs):
        report = build_fleet(
            inputs,
            months=months,
            first_month=first,
            current_fleet_monthly_usd=current,
            built_at=request.built_at,
        )
    else:  # its API pools too, when the recommendation buys API traffic
        report = build_with_api(
            inputs,
            months=months,
            first_month=first,
            current_fleet_monthly_usd=current,
            built_at=request.built_at,
        )
    return with_actuals(report, request.actuals)


def record_export(sessions: SessionScope, recommendation_id: int, fmt: str) -> None:
    """Note in the audit trail that the acting identity took a report out of the store."""
    require(Action.EXPORT)
    record(sessions, Action.EXPORT, f"report of recommendation {recommendation_id}", f"as {fmt}")


# --- what the report reads from the store ----------------------------------------------------


def _load(session: Session, recommendation_id: int) -> ReportInputs | FleetReportInputs:
    run = load_recommendation(session, recommendation_id)
    if is_fleet(run.result):
        fleet = stored_fleet(recommendation_id, run.created_at, run.result)
        return FleetReportInputs(
            fleet,
            [_inputs(session, pool) for pool in fleet.stored],
            # the models bought by the token: their forecasts' bands, no instance to price
            [_inputs(session, api) for api in fleet.api_stored],
        )
    # an overflow plan buys its base fleet, not the whole fleet self-hosting would take
    stored = base_fleet(stored_recommendation(recommendation_id, run.created_at, run.result))
    return _inputs(session, stored)


def _inputs(session: Session, stored: Stored) -> ReportInputs:
    """What a one-pool report (or one pool of a fleet's) reads: the prices in force for its
    instance and their price sheets, its forecast and its calibration profile."""
    w = stored.winner
    if not w:  # a plan all on a per-token API: no instance, so no instance prices or profile
        return ReportInputs(
            stored=stored,
            prices=[],
            sheets={},
            forecast=_forecast(session, stored),
            calibration=Calibration(unknown="the plan serves the demand on a per-token API"),
        )
    entries = latest_entries(
        session, w["provider"], region=w["region"], instance_type=w["instance_type"]
    )
    sheets = {}
    for version_id in sorted({e.version_id for e in entries}):
        version = get_version(session, version_id)
        sheets[version_id] = PriceSheet(
            version.id, version.label, version.describe(), version.source_ref or version.label
        )
    return ReportInputs(
        stored=stored,
        prices=[SheetPrice(e.point, e.version_id) for e in entries],
        sheets=sheets,
        forecast=_forecast(session, stored),
        calibration=_calibration(session, stored),
    )


def _forecast(session: Session, stored: Stored) -> DemandForecast | None:
    """The forecast behind the demand; None when the demand is no forecast or it is gone."""
    found = forecast_id(stored)
    if found is None:
        return None
    try:
        run = load_forecast(session, found)
    except NotFoundError:
        return None
    return DemandForecast(
        id=run.id,
        source=run.source,
        method=run.method,
        created_at=run.created_at,
        demand_quantile=run.demand_quantile,
        scores=run.scores,
        hours=points_frame(run),
    )


def _calibration(session: Session, stored: Stored) -> Calibration:
    """The profile the winner's latency was predicted with, and the error it states."""
    w = stored.winner
    try:
        profile = resolve_profile(
            known_profiles(session), w["gpu"], str(w.get("engine") or "trtllm")
        )
    except ProfileError as exc:
        return Calibration(unknown=str(exc))
    accuracy = profile_accuracy(profile, stored_accuracy(session, profile.name))
    return Calibration(profile.name, profile.engine, accuracy)
