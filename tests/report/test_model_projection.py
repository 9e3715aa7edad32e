"""The report's month-by-month arithmetic (``planner.report.projection``), on loads and prices
made by hand: tiling, calendar hours, cash against amortized views, commitments, scenarios."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest

from planner.errors import UsageError
from planner.report.model import COMMITMENT_COLUMNS, PROJECTION_COLUMNS
from planner.report.projection import (
    HourlyLoad,
    Purchase,
    add_months,
    band_ratio,
    commitment_schedule,
    month_hours,
    month_starts,
    project,
    scaled_fleet,
    tile,
)
from pricing.costs import HOURS_PER_YEAR, Plan, Prices, fleet_cost

MONDAY = datetime(2025, 1, 20, tzinfo=UTC)  # a Monday, 00:00 UTC


def weekly(values: list[float]) -> np.ndarray:
    """A week of hours: each day's 24 hours at that day's value (Monday first)."""
    return np.repeat(np.asarray(values, dtype=np.float64), 24)


def reserved_purchase(upfront_per_instance: float, reserved: int = 2, term: int = 1) -> Purchase:
    """Reserved instances with an upfront: effective rate 0.6 $/h (upfront included)."""
    prices = Prices(
        on_demand=1.0,
        reserved=0.6,
        reserved_upfront=upfront_per_instance,
        reserved_term_years=term,
    )
    return Purchase(
        "aws", "us-east-1", "g6.xlarge", f"reserved-{term}y", Plan(reserved=reserved), prices,
        term, reserved * upfront_per_instance,
    )  # fmt: skip


def test_months_have_their_real_hours() -> None:
    assert month_hours(date(2027, 2, 1)) == 672
    assert month_hours(date(2028, 2, 1)) == 696  # a leap year
    assert month_hours(date(2027, 4, 1)) == 720
    assert month_hours(date(2027, 12, 1)) == 744
    assert month_starts(date(2027, 11, 1), 3) == [
        date(2027, 11, 1),
        date(2027, 12, 1),
        date(2028, 1, 1),
    ]
    assert add_months(date(2027, 1, 1), 36) == date(2030, 1, 1)


def test_a_weekly_pattern_keeps_its_weekdays() -> None:
    pattern = weekly([1, 2, 3, 4, 5, 6, 7])
    # 2027-02-01 is a Monday, 2027-03-01 too; 2027-04-01 a Thursday
    february = tile(pattern, MONDAY, date(2027, 2, 1))
    assert february.size == 672
    assert np.array_equal(february, np.tile(pattern, 4))
    april = tile(pattern, MONDAY, date(2027, 4, 1))
    assert april[0] == 4 and april[24] == 5 and april[4 * 24] == 1
    assert april.size == 720


def test_a_pattern_shorter_than_a_day_repeats_back_to_back() -> None:
    start = datetime(2025, 1, 20, 10, tzinfo=UTC)
    pattern = np.array([5.0, 7.0])
    hours = tile(pattern, start, date(2027, 1, 1))
    # hour 0 of the month is an even number of hours after 10:00 on the pattern's day
    assert hours[0] == 5.0 and hours[1] == 7.0 and set(hours) == {5.0, 7.0}
    with pytest.raises(UsageError):
        tile(np.array([]), start, date(2027, 1, 1))


def test_each_month_is_priced_by_fleet_cost_split_by_option() -> None:
    purchase = reserved_purchase(upfront_per_instance=0.0)
    load = HourlyLoad(MONDAY, weekly([100] * 7), weekly([1, 2, 3, 4, 3, 2, 1]))
    months = month_starts(date(2027, 1, 1), 3)
    frame = project({"expected": load}, purchase, months, tokens_per_request=1000)
    assert list(frame.columns) == list(PROJECTION_COLUMNS)
    for month in months:
        rows = frame[frame["month"] == month]
        cost = fleet_cost(tile(load.instances, load.start, month), purchase.prices, purchase.plan)
        assert rows["cash_usd"].sum() == pytest.approx(cost.total_usd, abs=0.005)
        reserved = rows[rows["purchase_option"] == "reserved-1y"].iloc[0]
        assert reserved["instance_hours"] == 2 * month_hours(month)
        on_demand = rows[rows["purchase_option"] == "on-demand"].iloc[0]
        assert on_demand["cash_usd"] == pytest.approx(cost.on_demand_usd)
        # tokens: every request's, shared by the instance-hours each option serves
        assert rows["tokens_millions"].sum() == pytest.approx(100 * month_hours(month) * 0.001)
        served = reserved["tokens_millions"] / rows["tokens_millions"].sum()
        assert served == pytest.approx(cost.reserved_used_hours / cost.demand_instance_hours)


def test_amortized_equals_cash_over_the_term_with_an_upfront() -> None:
    upfront = 0.25 * HOURS_PER_YEAR  # a quarter of the 0.6 $/h effective rate paid upfront
    purchase = reserved_purchase(upfront_per_instance=upfront)
    load = HourlyLoad(MONDAY, weekly([10] * 7), weekly([1, 1, 3, 3, 3, 1, 1]))
    months = month_starts(date(2027, 1, 1), 12)
    frame = project({"expected": load}, purchase, months, tokens_per_request=1)
    assert frame["cash_usd"].sum() == pytest.approx(frame["amortized_usd"].sum(), abs=0.005)
    committed = frame[frame["purchase_option"] == "reserved-1y"].reset_index()
    assert committed.loc[0, "upfront_usd"] == 2 * upfront
    assert (committed.loc[1:, "upfront_usd"] == 0).all()
    # cash: the upfront in the first month; amortized: a twelfth of it every month
    recurring = 2 * (0.6 - 0.25) * month_hours(date(2027, 1, 1))
    assert committed.loc[0, "cash_usd"] == pytest.approx(recurring + 2 * upfront)
    assert committed.loc[0, "amortized_usd"] == pytest.approx(recurring + 2 * upfront / 12)
    # over the year the commitment costs what fleet_cost bills at its effective rate (8,760 h)
    assert committed["cash_usd"].sum() == pytest.approx(2 * 0.6 * 8760)


def test_a_commitment_is_renewed_when_its_term_ends() -> None:
    purchase = reserved_purchase(upfront_per_instance=1000.0)
    load = HourlyLoad(MONDAY, weekly([10] * 7), weekly([2] * 7))
    months = month_starts(date(2027, 1, 1), 24)
    frame = project({"expected": load}, purchase, months, tokens_per_request=1)
    paid = frame[frame["upfront_usd"] > 0]
    assert list(paid["month"]) == [date(2027, 1, 1), date(2028, 1, 1)]
    schedule = commitment_schedule(load, purchase, months, break_even=0.6)
    assert list(schedule.columns) == list(COMMITMENT_COLUMNS)
    assert list(schedule["start"]) == [date(2027, 1, 1), date(2028, 1, 1)]
    assert list(schedule["end"]) == [date(2028, 1, 1), date(2029, 1, 1)]
    assert schedule["expected_utilization"].tolist() == [1.0, 1.0]


def test_commitment_use_utilization_coverage_and_unused_cost() -> None:
    purchase = reserved_purchase(upfront_per_instance=0.0)
    # 1 instance on 4 days, 3 on 3 days: the 2 reserved are busy (4 x 1 + 3 x 2) / 14 of hours
    load = HourlyLoad(MONDAY, weekly([10] * 7), weekly([1, 1, 1, 1, 3, 3, 3]))
    months = month_starts(date(2027, 2, 1), 1)  # February 2027: exactly four weeks
    row = commitment_schedule(load, purchase, months, break_even=0.6).iloc[0]
    assert row["instances"] == 2
    assert row["hourly_commitment_usd"] == pytest.approx(1.2)
    assert row["expected_utilization"] == pytest.approx(10 / 14)
    assert row["coverage"] == pytest.approx(10 / 13)  # 13 instance-days of demand a week
    assert row["unused_usd_per_month"] == pytest.approx(4 / 14 * 1.2 * 672)


def test_a_savings_plan_bills_its_dollars_every_hour() -> None:
    prices = Prices(on_demand=1.0, savings_plan=0.5)
    plan = Plan(savings_plan_usd_per_hour=1.0)  # two instances' worth
    purchase = Purchase("aws", "us-east-1", "g6.xlarge", "savings-plan-1y", plan, prices, 1, 0.0)
    load = HourlyLoad(MONDAY, weekly([10] * 7), weekly([1, 1, 1, 1, 4, 4, 4]))
    month = date(2027, 2, 1)
    frame = project({"expected": load}, purchase, [month], tokens_per_request=1)
    committed = frame[frame["purchase_option"] == "savings-plan-1y"].iloc[0]
    assert committed["cash_usd"] == pytest.approx(672.0)
    assert committed["instance_hours"] == pytest.approx(2 * 672)
    on_demand = frame[frame["purchase_option"] == "on-demand"].iloc[0]
    assert on_demand["instance_hours"] == pytest.approx(3 * 2 * 24 * 4)
    row = commitment_schedule(load, purchase, [month], break_even=0.5).iloc[0]
    assert row["instances"] is None
    assert row["hourly_commitment_usd"] == pytest.approx(1.0)
    assert row["expected_utilization"] == pytest.approx(10 / 14)


def test_spot_and_its_interruptions_have_their_own_rows() -> None:
    prices = Prices(on_demand=1.0, spot=0.3)
    plan = Plan(spot_share=0.5, interruption_rate=0.1, replacement_hours=1.0)
    purchase = Purchase("gcp", "us-east4", "g2-standard-4", "on-demand", plan, prices)
    load = HourlyLoad(MONDAY, weekly([10] * 7), weekly([4] * 7))
    frame = project({"expected": load}, purchase, [date(2027, 2, 1)], tokens_per_request=1)
    by_option = frame.set_index("purchase_option")
    cost = fleet_cost(np.full(672, 4.0), prices, plan)
    assert by_option.loc["spot", "cash_usd"] == pytest.approx(cost.spot_usd)
    # the on-demand hours standing in for interrupted spot are billed on demand
    assert by_option.loc["on-demand", "cash_usd"] == pytest.approx(
        cost.on_demand_usd + cost.fallback_usd
    )
    assert by_option.loc["on-demand", "instance_hours"] == pytest.approx(672 * (2 + 2 * 0.1))
    assert frame["tokens_millions"].sum() == pytest.approx(10 * 672 / 1e6)


def test_scenario_fleets_scale_the_replicas_and_keep_the_order() -> None:
    replicas = np.array([4.0, 4.0, 1.0, 0.0])
    ratio = np.array([1.0, 1.3, 0.2, 0.0])
    assert scaled_fleet(replicas, ratio, 1, 1).tolist() == [4.0, 6.0, 1.0, 1.0]
    assert scaled_fleet(replicas, ratio, 0, 2).tolist() == [2.0, 3.0, 1.0, 0.0]
    planned = np.array([100.0, 100.0, 0.0, 50.0])
    band = np.array([80.0, 120.0, 30.0, np.inf])
    assert band_ratio(planned, band, above=False).tolist() == [0.8, 1.0, 1.0, 1.0]
    assert band_ratio(planned, band, above=True).tolist() == [1.0, 1.2, 1.0, 1.0]
    with pytest.raises(UsageError):
        scaled_fleet(replicas, ratio, 1, 0)


def test_a_commitment_needs_a_term() -> None:
    with pytest.raises(UsageError, match="term"):
        Purchase("aws", "r", "t", "reserved-1y", Plan(reserved=1), Prices(1.0, reserved=0.5))
