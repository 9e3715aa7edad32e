"""A fleet of pools' tables and charts (what the dashboard shows, the CSVs a user downloads and
``--plot``'s chart), from a real small fleet (``tests/report/test_fleet_report.py``)."""

from __future__ import annotations

import pytest

from planner.recommend.plot import figure
from planner.recommend.tables import input_range, result_tables
from tests.report.test_fleet_report import LARGE, SMALL, small_fleet


def test_a_fleet_has_its_own_tables() -> None:
    data = small_fleet().to_dict()
    pools = data["winner"]["pools"]
    tables = result_tables(data)
    assert set(tables) == {"pools", "models", "hourly"}
    assert list(tables["pools"]["pool"]) == [p["pool"] for p in pools]
    assert tables["pools"]["$ per month"].sum() == pytest.approx(data["winner"]["monthly_usd"])
    models = tables["models"]
    assert list(models["model"]) == [SMALL, LARGE]
    for row in models.to_dict("records"):
        mine = [p for p in pools if row["model"] in p["models"]]
        tokens = sum(p["monthly_usd"] / p["usd_per_million_tokens"] for p in mine)
        assert row["$ per million tokens"] == pytest.approx(row["$ per month"] / tokens)
    hourly = tables["hourly"]
    assert list(hourly["instances"]) == data["hourly"]["instances"]
    summed = hourly[[f"{p['pool']} instances" for p in pools]].sum(axis=1)
    assert list(summed) == data["hourly"]["instances"]


def test_the_plot_of_a_fleet_stacks_its_pools() -> None:
    data = small_fleet().to_dict()
    fig = figure(data)
    stacked = [t.name for t in fig.data if t.stackgroup == "fleet"]
    assert stacked == [p["pool"] for p in data["winner"]["pools"]]


@pytest.mark.parametrize(
    ("bounds", "words"),
    [([0, None], "all"), ([0, 1024], "0 to 1,023"), ([1024, None], "1,024 and up"), (None, "all")],
)
def test_input_ranges_in_words(bounds: list[int | None] | None, words: str) -> None:
    assert input_range(bounds) == words
