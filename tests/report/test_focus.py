"""The FOCUS 1.2 CSV, column by column, read back from the written file: names, types, allowed
values, ISO 8601 UTC month bounds, purchase rows that cover future usage (no EffectiveCost),
BilledCost / EffectiveCost adding up to the report's cash / amortized totals to the cent, and the
columns FOCUS 1.2 makes conditional (RegionName, Tags, SkuId / SkuPriceId, commitment quantities,
sub account, invoice); on the hand-made example report and on a real one built from the demo
store. The FinOps Foundation's validator checks the same file in test_focus_conformance.py."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from planner.errors import UsageError
from planner.report.focus import focus_frame, metadata_path, write_focus_csv
from planner.report.model import SCENARIOS, Report, first_of_next_month
from pricing.regions import REGION_NAMES, region_name

# Spelled out here, from the FOCUS 1.2 column library, rather than taken from the module.
FOCUS_COLUMNS = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart",
    "CommitmentDiscountCategory", "CommitmentDiscountId", "CommitmentDiscountName",
    "CommitmentDiscountQuantity", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "CommitmentDiscountUnit", "ConsumedQuantity", "ConsumedUnit", "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName",
    "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "ServiceSubcategory", "SkuId", "SkuMeter",
    "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
]  # fmt: skip
CUSTOM_COLUMNS = [
    "x_Scenario", "x_RecommendationId", "x_PurchaseOption", "x_TokensMillions",
    "x_CostPerMillionTokens", "x_P99TtftMs", "x_Model", "x_Pool",
]  # fmt: skip
DECIMALS = [
    "BilledCost", "CommitmentDiscountQuantity", "ConsumedQuantity", "ContractedCost",
    "ContractedUnitPrice", "EffectiveCost", "ListCost", "ListUnitPrice", "PricingQuantity",
    "x_TokensMillions", "x_CostPerMillionTokens", "x_P99TtftMs",
]  # fmt: skip
JSONS = ["SkuPriceDetails", "Tags"]
DATETIMES = ["BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart"]
NOT_NULL = [
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency",
    "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory", "ChargeDescription",
    "ChargeFrequency", "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost",
    "InvoiceIssuerName", "ListCost", "PricingCategory", "PricingQuantity", "PricingUnit",
    "ProviderName", "PublisherName", "RegionId", "RegionName", "ServiceCategory", "ServiceName",
    "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceId", "Tags", "x_Scenario",
    "x_RecommendationId", "x_PurchaseOption",
]  # fmt: skip
# null in a projection: no invoice yet, no account below the plan's
NULL = ["InvoiceId", "SubAccountId", "SubAccountName", "SkuPriceDetails"]
# FOCUS 1.2 allowed values
CHARGE_CATEGORIES = {"Usage", "Purchase", "Tax", "Credit", "Adjustment"}
PRICING_CATEGORIES = {"Standard", "Dynamic", "Committed", "Other"}
COMMITMENT_STATUSES = {"Used", "Unused"}
CHARGE_FREQUENCIES = {"One-Time", "Recurring", "Usage-Based"}
COMMITMENT_CATEGORIES = {"Spend", "Usage"}
ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
# no exponent, no separators, and a decimal point (a reader that infers types sees "744" as an
# integer, and FOCUS wants decimals)
PLAIN_DECIMAL = re.compile(r"^-?\d+\.\d+$")
CENT = 0.005


def read(path: Path) -> tuple[list[str], pd.DataFrame]:
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return header, frame


def number(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column].replace("", None), errors="raise").astype("float64")


def written(report: Report, folder: Path, **options: object) -> pd.DataFrame:
    path = write_focus_csv(report, folder / "plan.csv", **options)  # type: ignore[arg-type]
    header, frame = read(path)
    assert header == FOCUS_COLUMNS + CUSTOM_COLUMNS
    return frame


def check_columns(frame: pd.DataFrame) -> None:
    """Every column's type and allowed values, and the rules between columns."""
    assert len(frame) > 0
    for column in DECIMALS:
        values = frame[column]
        assert values.map(lambda v: v == "" or bool(PLAIN_DECIMAL.match(v))).all(), column
    assert frame["x_RecommendationId"].str.fullmatch(r"\d+").all()
    for column in NOT_NULL:
        assert (frame[column] != "").all(), column
    for column in NULL:
        assert (frame[column] == "").all(), column
    for column in JSONS:  # FOCUS KeyValueFormat: a JSON object of primitive values
        for text in frame[column][frame[column] != ""]:
            value = json.loads(text)
            assert isinstance(value, dict), (column, text)
            assert all(isinstance(v, str | int | float | bool) for v in value.values()), text
    tags = frame["Tags"].map(json.loads)
    assert (tags.map(lambda t: t["planner:scenario"]) == frame["x_Scenario"]).all()
    assert set(frame["ServiceSubcategory"]) == {"Virtual Machines"}  # a parent of Compute
    # one SKU per instance type and region, one SKU price per purchase option of it
    assert (frame["SkuPriceId"] == frame["SkuId"] + "/" + frame["x_PurchaseOption"]).all()
    assert frame.groupby("SkuPriceId")["SkuId"].nunique().max() == 1
    assert (frame["SkuId"].str.split("/").str[-1] == frame["ResourceType"]).all()
    # a commitment's quantity on each of its rows, in hours or (savings plans) dollars
    committed_rows = frame["CommitmentDiscountId"] != ""
    assert (frame.loc[committed_rows, "CommitmentDiscountQuantity"] != "").all()
    assert (frame.loc[~committed_rows, "CommitmentDiscountQuantity"] == "").all()
    assert ((frame["CommitmentDiscountUnit"] != "") == committed_rows).all()
    spend = frame["CommitmentDiscountCategory"] == "Spend"
    assert set(frame.loc[committed_rows & ~spend, "CommitmentDiscountUnit"]) <= {"Hours"}
    for column in DATETIMES:
        assert frame[column].str.match(ISO_UTC).all(), column
    assert set(frame["ChargeCategory"]) <= CHARGE_CATEGORIES
    assert set(frame["PricingCategory"]) <= PRICING_CATEGORIES
    assert set(frame["ChargeFrequency"]) <= CHARGE_FREQUENCIES
    assert set(frame["CommitmentDiscountStatus"]) - {""} <= COMMITMENT_STATUSES
    assert set(frame["CommitmentDiscountCategory"]) - {""} <= COMMITMENT_CATEGORIES
    assert set(frame["ChargeClass"]) == {""}  # no corrections in a plan
    assert set(frame["PricingUnit"]) == {"Hours"}
    assert set(frame["ServiceCategory"]) == {"Compute"}
    assert set(frame["x_Scenario"]) <= set(SCENARIOS)
    # month bounds: the first instant of the month to the first of the next (exclusive)
    for column in ("Charge", "Billing"):
        start = pd.to_datetime(frame[f"{column}PeriodStart"], utc=True)
        end = pd.to_datetime(frame[f"{column}PeriodEnd"], utc=True)
        assert (start.dt.day == 1).all() and (start.dt.hour == 0).all()
        expected_end = [first_of_next_month(d.date()) for d in start]
        assert [d.date() for d in end] == expected_end
    # CommitmentDiscountStatus: only on Usage rows of a commitment, and always there
    committed = frame["CommitmentDiscountId"] != ""
    usage = frame["ChargeCategory"] == "Usage"
    status = frame["CommitmentDiscountStatus"] != ""
    assert (status == (committed & usage)).all()
    assert (frame.loc[committed & usage, "PricingCategory"] == "Committed").all()
    assert (frame.loc[~committed, "PricingCategory"].isin(["Standard", "Dynamic"])).all()
    # ResourceType only beside a ResourceId (FOCUS 1.1)
    assert ((frame["ResourceType"] != "") == (frame["ResourceId"] != "")).all()
    # Purchase rows pay for future usage: BilledCost > 0, EffectiveCost 0, Standard pricing
    purchase = frame[frame["ChargeCategory"] == "Purchase"]
    assert (number(purchase, "BilledCost") > 0).all()
    assert (number(purchase, "EffectiveCost") == 0).all()
    assert (purchase["PricingCategory"] == "Standard").all()
    assert (purchase["CommitmentDiscountId"] != "").all()
    assert (purchase["ChargeFrequency"].isin(["One-Time", "Recurring"])).all()
    # commitment usage is billed through its purchases: BilledCost 0 on committed usage rows
    assert (number(frame[committed & usage], "BilledCost") == 0).all()
    hours_based = committed & usage & (frame["CommitmentDiscountUnit"] == "Hours")
    assert (
        number(frame[hours_based], "CommitmentDiscountQuantity")
        == number(frame[hours_based], "PricingQuantity")
    ).all()
    # unit prices times quantity make the costs, where there is a unit price
    priced = frame[frame["ListUnitPrice"] != ""]
    for cost, price in (("ListCost", "ListUnitPrice"), ("ContractedCost", "ContractedUnitPrice")):
        product = number(priced, price) * number(priced, "PricingQuantity")
        assert (product - number(priced, cost)).abs().max() < CENT
    unused = frame[frame["CommitmentDiscountStatus"] == "Unused"]
    assert (number(unused, "ListCost") == 0).all() and (unused["ConsumedQuantity"] == "").all()
    assert (number(frame, "ContractedCost") == number(frame, "ListCost")).all()


def check_totals(report: Report, frame: pd.DataFrame, scenarios: tuple[str, ...]) -> None:
    """Per scenario and month: BilledCost = cash, EffectiveCost = amortized, to the cent."""
    month = pd.to_datetime(frame["ChargePeriodStart"]).dt.date
    for scenario in scenarios:
        mine = frame["x_Scenario"] == scenario
        for column, view in (("BilledCost", "cash"), ("EffectiveCost", "amortized")):
            grouped = number(frame[mine], column).groupby(month[mine]).sum()
            sums = {str(key): float(value) for key, value in grouped.items()}
            totals = report.monthly_totals(scenario, view)
            planned = {str(key): float(value) for key, value in totals.items() if value}
            assert sorted(sums) == sorted(planned), (scenario, column)
            for key, total in planned.items():
                # to the cent, and much closer: the file keeps 10 decimal places
                assert abs(sums[key] - total) < 1e-6, (scenario, column, key)


def test_example_report_column_by_column(report: Report, tmp_path: Path) -> None:
    frame = written(report, tmp_path)
    check_columns(frame)
    check_totals(report, frame, SCENARIOS)
    assert set(frame["x_Scenario"]) == set(SCENARIOS)
    assert frame["x_Scenario"].iloc[0] == "expected"
    assert set(frame["BillingCurrency"]) == {"USD"}
    assert set(frame["ProviderName"]) == {"Google Cloud"} and set(frame["RegionId"]) == {"us-east4"}
    assert set(frame["RegionName"]) == {"Ashburn, Virginia, North America"}
    assert set(frame["ResourceType"]) == {"g2-standard-4"}
    assert set(frame["SkuId"]) == {"planner-sku/gcp/us-east4/g2-standard-4"}
    assert set(frame["x_P99TtftMs"]) == {"1083.0"}
    # the projection carries no model or pool: no such tags, null custom columns
    assert set(frame["x_Model"]) == set(frame["x_Pool"]) == {""}
    assert {tuple(json.loads(t)) for t in frame["Tags"]} == {("planner:scenario",)}


def test_the_upfront_is_one_purchase_in_the_month_it_is_paid(
    report: Report, tmp_path: Path
) -> None:
    frame = written(report, tmp_path)
    one_time = frame[frame["ChargeFrequency"] == "One-Time"]
    assert len(one_time) == 3  # once per scenario
    assert set(one_time["ChargePeriodStart"]) == {"2027-01-01T00:00:00Z"}
    assert number(one_time, "BilledCost").tolist() == [1000.0] * 3
    assert number(one_time, "EffectiveCost").tolist() == [0.0] * 3
    assert set(one_time["ChargeCategory"]) == {"Purchase"}
    # the 3-year term's committed hours: 7 instances x 3 x 8760 h
    assert number(one_time, "PricingQuantity").tolist() == [7 * 3 * 8760.0] * 3
    # the term's committed hours, what the upfront buys
    assert number(one_time, "CommitmentDiscountQuantity").tolist() == [7 * 3 * 8760.0] * 3
    assert set(one_time["PricingQuantity"]) == {"183960.0"}  # a decimal, though whole
    # the upfront reaches EffectiveCost through the committed usage rows, 1000/36 a month
    expected = frame[frame["x_Scenario"] == "expected"]
    committed = expected[expected["CommitmentDiscountStatus"] != ""]
    june = committed[committed["ChargePeriodStart"] == "2027-06-01T00:00:00Z"]
    assert number(june, "EffectiveCost").sum() == pytest.approx(7 * 720 * 0.444 + 1000 / 36)


def test_used_and_unused_split_by_expected_utilization(report: Report, tmp_path: Path) -> None:
    frame = written(report, tmp_path, scenarios=("expected",))
    january = frame[frame["ChargePeriodStart"] == "2027-01-01T00:00:00Z"]
    used = january[january["CommitmentDiscountStatus"] == "Used"]
    unused = january[january["CommitmentDiscountStatus"] == "Unused"]
    assert len(used) == len(unused) == 1
    amortized = 7 * 744 * 0.444 + 1000 / 36
    assert float(used["EffectiveCost"].iloc[0]) == pytest.approx(0.962 * amortized, abs=1e-6)
    assert float(unused["EffectiveCost"].iloc[0]) == pytest.approx(0.038 * amortized, abs=1e-6)
    assert float(used["PricingQuantity"].iloc[0]) == pytest.approx(0.962 * 7 * 744)
    assert float(used["ConsumedQuantity"].iloc[0]) == pytest.approx(0.962 * 7 * 744)
    assert float(used["CommitmentDiscountQuantity"].iloc[0]) == pytest.approx(0.962 * 7 * 744)
    assert float(unused["CommitmentDiscountQuantity"].iloc[0]) == pytest.approx(0.038 * 7 * 744)
    # list cost of the used hours at the on-demand price: the saving is ListCost - EffectiveCost
    assert float(used["ListCost"].iloc[0]) == pytest.approx(0.962 * 7 * 744 * 0.7045, abs=1e-6)
    fee = january[january["ChargeFrequency"] == "Recurring"]
    assert number(fee, "BilledCost").tolist() == pytest.approx([7 * 744 * 0.444])
    assert number(fee, "CommitmentDiscountQuantity").tolist() == [7 * 744.0]  # the month's hours
    assert set(frame["x_Scenario"]) == {"expected"}


def test_spot_is_dynamic_at_the_on_demand_list_price(report: Report, tmp_path: Path) -> None:
    projection = report.projection
    spot = projection[projection["purchase_option"] == "on-demand"].copy()
    spot["purchase_option"] = "spot"
    spot["cash_usd"] = spot["amortized_usd"] = spot["instance_hours"] * 0.25
    with_spot = replace(report, projection=pd.concat([projection, spot], ignore_index=True))
    frame = written(with_spot, tmp_path)
    check_columns(frame)
    check_totals(with_spot, frame, SCENARIOS)
    rows = frame[frame["x_PurchaseOption"] == "spot"]
    assert set(rows["PricingCategory"]) == {"Dynamic"}
    assert set(number(rows, "ListUnitPrice").round(6)) == {0.7045}
    assert (number(rows, "BilledCost") < number(rows, "ListCost")).all()


def test_a_savings_plan_counts_its_commitment_in_dollars(report: Report, tmp_path: Path) -> None:
    hourly = 7 * 0.444  # the plan's $ an hour
    projection = report.projection.replace({"purchase_option": {"committed-3y": "savings-plan-1y"}})
    commitments = report.commitments.assign(
        purchase_option="savings-plan-1y", term_years=1, instances=None,
        hourly_commitment_usd=hourly,
    )  # fmt: skip
    plan = replace(report, projection=projection, commitments=commitments)
    frame = written(plan, tmp_path, scenarios=("expected",))
    check_columns(frame)
    check_totals(plan, frame, ("expected",))
    committed = frame[frame["CommitmentDiscountId"] != ""]
    assert set(committed["CommitmentDiscountCategory"]) == {"Spend"}
    assert set(committed["CommitmentDiscountUnit"]) == {"USD"}
    assert set(committed["CommitmentDiscountType"]) == {"Commitment"}  # no GCP savings plan
    one_time = committed[committed["ChargeFrequency"] == "One-Time"]
    assert number(one_time, "CommitmentDiscountQuantity").tolist() == pytest.approx([hourly * 8760])
    # used and unused dollars add up to the month's commitment, as EffectiveCost does
    usage = committed[committed["ChargeCategory"] == "Usage"]
    assert number(usage, "CommitmentDiscountQuantity").sum() == pytest.approx(
        number(usage, "EffectiveCost").sum()
    )


def test_model_and_pool_of_the_projection_rows_are_written_where_present(
    report: Report, tmp_path: Path
) -> None:
    projection = report.projection.assign(model="llama-3.1-8b", pool="chat")
    on_demand = projection["purchase_option"] == "on-demand"
    projection.loc[on_demand, "pool"] = None  # a row without a pool: null, no tag
    frame = written(replace(report, projection=projection), tmp_path)
    check_columns(frame)
    check_totals(report, frame, SCENARIOS)
    tags = frame["Tags"].map(json.loads)
    assert set(frame["x_Model"]) == {"llama-3.1-8b"}
    assert (tags.map(lambda t: t["planner:model"]) == "llama-3.1-8b").all()
    rows_on_demand = frame["x_PurchaseOption"] == "on-demand"
    assert set(frame.loc[rows_on_demand, "x_Pool"]) == {""}
    assert not any("planner:pool" in t for t in tags[rows_on_demand])
    assert set(frame.loc[~rows_on_demand, "x_Pool"]) == {"chat"}
    assert (tags[~rows_on_demand].map(lambda t: t["planner:pool"]) == "chat").all()
    # the pool's usage is a resource of its own
    pooled_usage = ~rows_on_demand & (frame["CommitmentDiscountStatus"] == "Used")
    assert frame.loc[pooled_usage, "ResourceId"].str.endswith("/g2-standard-4/chat").all()
    assert frame.loc[rows_on_demand, "ResourceId"].str.endswith("/g2-standard-4").all()


def test_every_region_of_the_price_snapshot_has_a_name() -> None:
    from pricing.snapshot import load_snapshot

    regions = {(p.provider.value, p.region) for p in load_snapshot()}
    assert len(regions) >= 5
    unnamed = [r for r in sorted(regions) if region_name(*r) is None]
    assert unnamed == []
    assert region_name("aws", "us-east-1") == "US East (N. Virginia)"
    assert region_name("azure", " EastUS2 ") == "East US 2"
    assert region_name("aws", "eastus") is None  # an id is a provider's
    assert len({(p, r) for p, r, _ in REGION_NAMES}) == len(REGION_NAMES)


def test_a_region_without_a_name_is_named_by_its_id(report: Report) -> None:
    projection = report.projection.assign(region="us-south9")
    frame = focus_frame(replace(report, projection=projection), scenarios=("expected",))
    assert set(frame["RegionId"]) == set(frame["RegionName"]) == {"us-south9"}


def test_rows_of_nothing_are_left_out(report: Report) -> None:
    projection = report.projection.copy()
    low = projection["scenario"] == "low"
    projection.loc[low & (projection["purchase_option"] == "on-demand"), ["instance_hours",
        "cash_usd", "amortized_usd", "tokens_millions"]] = 0.0  # fmt: skip
    frame = focus_frame(replace(report, projection=projection), scenarios=("low",))
    assert set(frame["x_PurchaseOption"]) == {"committed-3y"}


def test_metadata_pins_focus_1_2_and_describes_every_column(report: Report, tmp_path: Path) -> None:
    path = write_focus_csv(report, tmp_path / "plan.csv")
    meta_file = metadata_path(path)
    assert meta_file == tmp_path / "plan.focus-metadata.json"
    meta = json.loads(meta_file.read_text())
    assert meta["FocusVersion"] == "1.2"
    assert meta["DataGenerator"] == "planner 0.1.0"
    assert meta["CreationDate"] == "2026-12-01T12:00:00Z"
    assert re.fullmatch(r"[0-9a-f]{32}", meta["SchemaId"])
    header, frame = read(path)
    definitions = meta["ColumnDefinition"]
    assert [d["ColumnName"] for d in definitions] == header
    types = {d["ColumnName"]: d["DataType"] for d in definitions}
    assert {c for c, t in types.items() if t == "DECIMAL"} == set(DECIMALS)
    assert {c for c, t in types.items() if t == "DATETIME"} == set(DATETIMES)
    assert {c for c, t in types.items() if t == "JSON"} == set(JSONS)
    assert types["x_RecommendationId"] == "INTEGER"
    assert set(types.values()) == {"DECIMAL", "DATETIME", "STRING", "INTEGER", "JSON"}
    assert meta["DataLocation"] == [
        {"FilePath": "plan.csv", "TotalBytes": path.stat().st_size, "TotalRows": len(frame)}
    ]


def test_same_report_same_bytes_and_an_existing_file_is_replaced_whole(
    report: Report, tmp_path: Path
) -> None:
    target = tmp_path / "plan.csv"
    target.write_text("old\n")
    write_focus_csv(report, target)
    first = target.read_bytes()
    write_focus_csv(report, target)
    assert target.read_bytes() == first
    assert first.startswith(b"BilledCost,BillingAccountId,")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_nothing_is_written_when_either_file_cannot_be(report: Report, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        write_focus_csv(report, tmp_path / "absent" / "plan.csv")
    (tmp_path / "plan.focus-metadata.json").mkdir()  # the metadata's place is taken
    with pytest.raises(UsageError, match="is a folder"):
        write_focus_csv(report, tmp_path / "plan.csv")
    assert not (tmp_path / "plan.csv").exists()
    with pytest.raises(UsageError, match="scenario"):
        write_focus_csv(report, tmp_path / "other.csv", scenarios=("likely",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.focus-metadata.json"]


def test_a_device_gets_the_csv_and_no_metadata(report: Report) -> None:
    assert write_focus_csv(report, Path("/dev/null")) == Path("/dev/null")
    assert not Path("/dev/null.focus-metadata.json").exists()


# --- a real report from the demo store ----------------------------------------------------------


@pytest.fixture
def demo_report(focus_demo_report: Report) -> Report:
    return focus_demo_report


def test_a_real_report_column_by_column_and_to_the_cent(
    demo_report: Report, tmp_path: Path
) -> None:
    frame = written(demo_report, tmp_path)
    check_columns(frame)
    check_totals(demo_report, frame, SCENARIOS)
    commitments = demo_report.commitments
    assert len(commitments) > 0
    utilization = float(commitments["expected_utilization"].iloc[0])
    expected = frame[frame["x_Scenario"] == "expected"]
    used = number(expected[expected["CommitmentDiscountStatus"] == "Used"], "EffectiveCost")
    unused = number(expected[expected["CommitmentDiscountStatus"] == "Unused"], "EffectiveCost")
    assert used.sum() / (used.sum() + unused.sum()) == pytest.approx(utilization)
    months = {d.date() for d in pd.to_datetime(frame["ChargePeriodStart"])}
    assert len(months) == demo_report.summary["months"]
