"""The AWS loader against real boto3 clients answered by botocore's Stubber (no network).

Payloads: tests/fixtures/prices/aws/ (see its README for what is real and what is synthetic).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped]

from planner.errors import PlannerError
from planner.latency.catalog import load_catalog
from pricing import loaders
from pricing.loaders import LoaderError, aws
from pricing.model import PricePoint, Provider, PurchaseOption

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "aws"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
REGION = "us-east-1"
FAMILIES = ["g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en"]
ACCESS_KEY = "AKIAFIXTUREFIXTURE00"
SECRET_KEY = "fixture/secret/never-shown"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


def client(service: str, region: str = REGION) -> Any:
    return boto3.client(
        service,
        region_name=region,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


def expected_filters(family: str) -> list[dict[str, str]]:
    """Spelled out here rather than taken from the loader, so a changed request is noticed."""
    return [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": REGION},
        {"Type": "CONTAINS", "Field": "instanceType", "Value": f"{family}."},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]


def products_params(family: str, token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "FormatVersion": "aws_v1",
        "Filters": expected_filters(family),
    }
    if token:
        params["NextToken"] = token
    return params


PRODUCT_PAGES = {
    "g5": ["get_products_g5_page1.json"],
    "p4d": ["get_products_p4d_page1.json", "get_products_p4d_page2.json"],
    "p5": ["get_products_p5_page1.json"],
}
INSTANCE_TYPES = [
    "g5.12xlarge",
    "g5.48xlarge",
    "g5.xlarge",
    "p4d.24xlarge",
    "p5.48xlarge",
]


def stub_products(stubber: Stubber) -> None:
    for family in FAMILIES:
        token = None
        for name in PRODUCT_PAGES.get(family, []):
            page = load(name)
            stubber.add_response("get_products", page, products_params(family, token))
            token = page.get("NextToken")
        if family not in PRODUCT_PAGES:
            stubber.add_response(
                "get_products",
                {"FormatVersion": "aws_v1", "PriceList": []},
                products_params(family),
            )


def sp_params(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "savingsPlanTypes": ["Compute", "EC2Instance"],
        "savingsPlanPaymentOptions": ["No Upfront"],
        "products": ["EC2"],
        "serviceCodes": ["AmazonEC2"],
        "operations": ["RunInstances"],
        "filters": [
            {"name": "region", "values": [REGION]},
            {"name": "instanceType", "values": INSTANCE_TYPES},
            {"name": "productDescription", "values": ["Linux/UNIX"]},
            {"name": "tenancy", "values": ["shared"]},
        ],
        "maxResults": 1000,
    }
    if token:
        params["nextToken"] = token
    return params


def spot_params(token: str | None = None, days: int = 7) -> dict[str, Any]:
    params: dict[str, Any] = {
        "InstanceTypes": INSTANCE_TYPES,
        "ProductDescriptions": ["Linux/UNIX"],
        "StartTime": NOW - timedelta(days=days),
        "EndTime": NOW,
    }
    if token:
        params["NextToken"] = token
    return params


class Stubs:
    def __init__(self) -> None:
        self.clients = aws.AwsClients(
            pricing=client("pricing"), savingsplans=client("savingsplans"), ec2=client("ec2")
        )
        self.pricing = Stubber(self.clients.pricing)
        self.savingsplans = Stubber(self.clients.savingsplans)
        self.ec2 = Stubber(self.clients.ec2)

    def all(self) -> list[Stubber]:
        return [self.pricing, self.savingsplans, self.ec2]

    def stub_everything(self) -> None:
        stub_products(self.pricing)
        self.savingsplans.add_response(
            "describe_savings_plans_offering_rates",
            load("savings_plans_rates_page1.json"),
            sp_params(),
        )
        self.savingsplans.add_response(
            "describe_savings_plans_offering_rates",
            load("savings_plans_rates_page2.json"),
            sp_params("sp-page-2"),
        )
        self.ec2.add_response(
            "describe_spot_price_history", load("spot_price_history_page1.json"), spot_params()
        )
        self.ec2.add_response(
            "describe_spot_price_history",
            load("spot_price_history_page2.json"),
            spot_params("spot-page-2"),
        )


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    s = Stubs()
    for stubber in s.all():
        stubber.activate()
    yield s
    for stubber in s.all():
        stubber.deactivate()


@pytest.fixture
def points(stubs: Stubs) -> list[PricePoint]:
    stubs.stub_everything()
    result = aws.fetch(REGION, client=stubs.clients, now=NOW)
    for stubber in stubs.all():
        stubber.assert_no_pending_responses()  # every page of every call was requested
    return result


def find(points: list[PricePoint], instance_type: str, option: PurchaseOption) -> list[PricePoint]:
    return [p for p in points if p.instance_type == instance_type and p.purchase_option == option]


def one(
    points: list[PricePoint], instance_type: str, option: PurchaseOption, **match: str
) -> PricePoint:
    found = [
        p
        for p in find(points, instance_type, option)
        if all(getattr(p, k) == v for k, v in match.items())
    ]
    assert len(found) == 1, found
    return found[0]


def test_the_price_list_json_strings_become_on_demand_prices(points: list[PricePoint]) -> None:
    p4d = one(points, "p4d.24xlarge", PurchaseOption.ON_DEMAND)
    assert p4d.usd_per_hour == pytest.approx(32.7726)  # the opencost offer file, 2024-05
    assert p4d.effective_date == "2024-05-01"
    assert p4d.provider is Provider.AWS and p4d.region == REGION and p4d.currency == "USD"
    assert (p4d.gpu_model, p4d.gpu_count, p4d.gpu_memory_gb) == ("A100-40GB", 8, 40.0)
    assert (p4d.vcpus, p4d.ram_gb) == (96, 1152.0)
    assert p4d.source == "aws pricing.get_products AmazonEC2 H7NGEAC6UEHNTKSJ.JRTCKXETXF"
    assert p4d.fetched_at == NOW
    assert p4d.usd_per_gpu_hour == pytest.approx(32.7726 / 8)

    p5 = one(points, "p5.48xlarge", PurchaseOption.ON_DEMAND)
    assert (p5.usd_per_hour, p5.gpu_model, p5.gpu_count) == (55.04, "H100-SXM", 8)
    g5 = {p.instance_type: p for p in points if p.purchase_option is PurchaseOption.ON_DEMAND}
    assert g5["g5.xlarge"].usd_per_hour == 1.006 and g5["g5.xlarge"].gpu_count == 1
    assert g5["g5.12xlarge"].gpu_count == 4 and g5["g5.12xlarge"].ram_gb == 192.0
    assert g5["g5.48xlarge"].gpu_count == 8 and g5["g5.48xlarge"].vcpus == 192
    assert {g5[t].gpu_model for t in ("g5.xlarge", "g5.12xlarge")} == {"A10G"}


def test_capacity_block_and_windows_rows_are_dropped(points: list[PricePoint]) -> None:
    on_demand = find(points, "p4d.24xlarge", PurchaseOption.ON_DEMAND)
    assert [p.usd_per_hour for p in on_demand] == [pytest.approx(32.7726)]  # not 0.00, not 36.91
    assert all(p.usd_per_hour > 0 for p in points)
    sources = " ".join(p.source for p in points)
    assert "YSXJGN78QTXNVGDQ" not in sources  # the $0.00 CapacityBlock SKU
    assert "FIXTUREWINP4D000" not in sources  # the Windows SKU (on page 2)


def test_reserved_terms_amortize_the_upfront_over_the_term(points: list[PricePoint]) -> None:
    reserved = [p for p in points if p.purchase_option.value.startswith("reserved")]
    # 12 terms in the item: 6 standard kept, 6 convertible dropped
    assert {(p.purchase_option.value, p.payment) for p in reserved} == {
        (f"reserved-{y}", pay)
        for y in ("1y", "3y")
        for pay in ("no-upfront", "partial-upfront", "all-upfront")
    }
    assert all(p.instance_type == "p4d.24xlarge" for p in reserved)
    by = {(p.purchase_option, p.payment): p for p in reserved}
    # values are the m5.large 2020 item's, rekeyed onto the p4d SKU (see the fixture README)
    no_1y = by[(PurchaseOption.RESERVED_1Y, "no-upfront")]
    assert (no_1y.usd_per_hour, no_1y.upfront_usd) == (0.06, 0.0)
    partial_1y = by[(PurchaseOption.RESERVED_1Y, "partial-upfront")]
    assert partial_1y.usd_per_hour == pytest.approx(0.029 + 252 / 8760)
    assert partial_1y.upfront_usd == 252.0
    all_1y = by[(PurchaseOption.RESERVED_1Y, "all-upfront")]  # an $0.00 Hrs rate, kept
    assert all_1y.usd_per_hour == pytest.approx(494 / 8760) and all_1y.upfront_usd == 494.0
    partial_3y = by[(PurchaseOption.RESERVED_3Y, "partial-upfront")]
    assert partial_3y.usd_per_hour == pytest.approx(0.019 + 505 / 26280)
    all_3y = by[(PurchaseOption.RESERVED_3Y, "all-upfront")]
    assert all_3y.usd_per_hour == pytest.approx(949 / 26280) and all_3y.upfront_usd == 949.0
    assert by[(PurchaseOption.RESERVED_3Y, "no-upfront")].usd_per_hour == 0.041
    assert all_3y.source.endswith("H7NGEAC6UEHNTKSJ.NQ3QZPMQV9")
    assert all_3y.effective_date == "2020-04-01"


def test_savings_plans_by_kind_and_term(points: list[PricePoint]) -> None:
    plans = {
        (p.instance_type, p.purchase_option, p.plan_kind): p.usd_per_hour
        for p in points
        if p.purchase_option.value.startswith("savings-plan")
    }
    assert plans == {
        ("p4d.24xlarge", PurchaseOption.SAVINGS_PLAN_1Y, "compute"): 24.0,
        ("p4d.24xlarge", PurchaseOption.SAVINGS_PLAN_3Y, "compute"): 16.0,
        ("p4d.24xlarge", PurchaseOption.SAVINGS_PLAN_1Y, "instance-family"): 20.0,
        ("p4d.24xlarge", PurchaseOption.SAVINGS_PLAN_3Y, "instance-family"): 12.0,
        # page 2; the dedicated-tenancy p5 row and the g6 row (no shape) are dropped
        ("p5.48xlarge", PurchaseOption.SAVINGS_PLAN_1Y, "compute"): 44.0,
        ("p5.48xlarge", PurchaseOption.SAVINGS_PLAN_3Y, "instance-family"): 26.0,
    }
    sp = one(points, "p5.48xlarge", PurchaseOption.SAVINGS_PLAN_1Y)
    assert sp.payment == "no-upfront" and sp.upfront_usd == 0.0
    assert sp.effective_date == "2026-11-29" and sp.gpu_count == 8


def test_spot_is_the_median_across_zones_and_pages(points: list[PricePoint]) -> None:
    p4d = one(points, "p4d.24xlarge", PurchaseOption.SPOT)
    assert p4d.usd_per_hour == pytest.approx(11.5)  # median of 10, 12, 11, 30
    assert "4 prices in 4 zones over 7 days" in p4d.source
    assert one(points, "g5.xlarge", PurchaseOption.SPOT).usd_per_hour == pytest.approx(0.45)
    assert one(points, "p5.48xlarge", PurchaseOption.SPOT).usd_per_hour == 20.0
    assert not find(points, "g5.12xlarge", PurchaseOption.SPOT)  # no history: no price


def test_every_gpu_is_a_planner_catalog_name(points: list[PricePoint]) -> None:
    catalog = load_catalog()
    for model, _memory in aws.GPU_FAMILIES.values():
        assert catalog.gpus.get(model).name == model
    assert {p.gpu_model for p in points} <= set(catalog.gpus.names())


def test_one_point_per_key(points: list[PricePoint]) -> None:
    keys = [p.key() for p in points]
    assert len(keys) == len(set(keys))
    assert len(points) == 5 + 6 + 6 + 3  # on-demand, reserved, savings plans, spot


def test_spot_lookback_and_optional_calls(stubs: Stubs) -> None:
    stub_products(stubs.pricing)
    stubs.ec2.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": []},
        spot_params(days=2),
    )
    points = aws.fetch(
        REGION, client=stubs.clients, now=NOW, spot_lookback=timedelta(days=2), savings_plans=False
    )
    stubs.ec2.assert_no_pending_responses()
    assert {p.purchase_option for p in points} == {
        PurchaseOption.ON_DEMAND,
        PurchaseOption.RESERVED_1Y,
        PurchaseOption.RESERVED_3Y,
    }


def test_throttling_is_a_loader_error_naming_aws_and_the_reason(stubs: Stubs) -> None:
    stubs.pricing.add_client_error(
        "get_products",
        service_error_code="ThrottlingException",
        service_message="Rate exceeded",
        http_status_code=400,
        expected_params=products_params("g5"),
    )
    with pytest.raises(LoaderError) as info:
        aws.fetch(REGION, client=stubs.clients, now=NOW)
    error = info.value
    assert isinstance(error, PlannerError)
    assert error.provider == "aws"
    assert str(error) == (
        "aws price refresh failed: pricing.get_products: ThrottlingException: Rate exceeded"
    )
    assert ACCESS_KEY not in str(error) and SECRET_KEY not in str(error)


def test_access_denied_on_a_later_page_fails_the_whole_refresh(stubs: Stubs) -> None:
    stub_products(stubs.pricing)
    stubs.savingsplans.add_response(
        "describe_savings_plans_offering_rates",
        load("savings_plans_rates_page1.json"),
        sp_params(),
    )
    stubs.savingsplans.add_client_error(
        "describe_savings_plans_offering_rates",
        service_error_code="AccessDeniedException",
        service_message="not authorized to perform: savingsplans:DescribeSavingsPlansOfferingRates",
        http_status_code=403,
    )
    with pytest.raises(
        LoaderError,
        match=r"^aws price refresh failed: savingsplans\."
        r"describe_savings_plans_offering_rates: AccessDeniedException: not authorized",
    ):
        aws.fetch(REGION, client=stubs.clients, now=NOW)


def test_spot_error_on_the_second_page(stubs: Stubs) -> None:
    stub_products(stubs.pricing)
    stubs.ec2.add_response(
        "describe_spot_price_history", load("spot_price_history_page1.json"), spot_params()
    )
    stubs.ec2.add_client_error(
        "describe_spot_price_history",
        service_error_code="UnauthorizedOperation",
        service_message="You are not authorized to perform this operation.",
        http_status_code=403,
    )
    with pytest.raises(LoaderError, match="describe_spot_price_history: UnauthorizedOperation"):
        aws.fetch(REGION, client=stubs.clients, now=NOW, savings_plans=False)


def test_a_price_list_element_that_is_not_json(stubs: Stubs) -> None:
    stubs.pricing.add_response(
        "get_products",
        {"FormatVersion": "aws_v1", "PriceList": ['{"product": {"attributes": ']},
        products_params("g5"),
    )
    with pytest.raises(
        LoaderError, match="aws price refresh failed: PriceList element is not valid JSON"
    ):
        aws.fetch(REGION, client=stubs.clients, now=NOW)


def test_the_package_dispatches_to_the_aws_loader(stubs: Stubs) -> None:
    stubs.stub_everything()
    points = loaders.fetch(Provider.AWS, REGION, client=stubs.clients, now=NOW)
    assert len(points) == 20


def test_unknown_provider() -> None:
    with pytest.raises(LoaderError, match="^oracle price refresh failed: no live loader"):
        loaders.fetch("oracle")


def test_no_credentials_in_the_chain_is_a_loader_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An empty standard chain, with the instance-metadata lookup switched off: botocore refuses
    # to sign the first request, before anything is sent.
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(LoaderError) as info:
        aws.fetch(REGION, session=boto3.session.Session(), now=NOW)
    assert str(info.value) == (
        "aws price refresh failed: pricing.get_products: Unable to locate credentials"
    )
