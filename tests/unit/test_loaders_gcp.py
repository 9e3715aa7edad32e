"""The GCP loader against a real CloudCatalogClient whose transport answers from recorded pages.

The fake transport subclasses the client library's own ``CloudCatalogTransport``: the client, its
method wrapping, the ``ListSkusPager`` and the proto messages are the library's real code; only
the RPC (what would go over gRPC) is replaced. Pages: tests/fixtures/prices/gcp/ (README there).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as api_exceptions
from google.api_core import gapic_v1
from google.auth.credentials import AnonymousCredentials
from google.cloud.billing_v1 import CloudCatalogClient, ListSkusRequest, ListSkusResponse
from google.cloud.billing_v1.services.cloud_catalog.transports import CloudCatalogTransport

from planner.latency.catalog import load_catalog
from pricing import loaders
from pricing.loaders import LoaderError, gcp
from pricing.model import PricePoint, Provider, PurchaseOption

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "gcp"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PAGE1 = FIXTURES / "skus_page1_opencost.json"
PAGE2 = FIXTURES / "skus_page2_derived.json"


def page(path: Path) -> ListSkusResponse:
    response: ListSkusResponse = ListSkusResponse.from_json(
        path.read_text(), ignore_unknown_fields=True
    )
    return response


class FakeCatalogTransport(CloudCatalogTransport):
    """Answers ``list_skus`` from recorded pages keyed by ``page_token`` (or raises)."""

    def __init__(self, answer: Callable[[ListSkusRequest], ListSkusResponse]) -> None:
        super().__init__(credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]
        self.answer = answer
        self.requests: list[ListSkusRequest] = []
        self._prep_wrapped_messages(gapic_v1.client_info.DEFAULT_CLIENT_INFO)  # type: ignore[no-untyped-call]

    def _list_skus(
        self,
        request: ListSkusRequest,
        *,
        timeout: float | None = None,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> ListSkusResponse:
        self.requests.append(ListSkusRequest(request))  # a copy: the pager reuses its request
        return self.answer(request)

    @property
    def list_skus(self) -> Any:
        return self._list_skus

    @property
    def list_services(self) -> Any:
        return self._list_services

    def _list_services(self, request: Any, **_: Any) -> Any:
        raise AssertionError("the loader should not list services")

    def close(self) -> None:
        pass

    @property
    def kind(self) -> str:
        return "fake"


def recorded(pages: dict[str, ListSkusResponse]) -> Callable[[ListSkusRequest], ListSkusResponse]:
    def answer(request: ListSkusRequest) -> ListSkusResponse:
        return pages[request.page_token]

    return answer


def catalog_client(
    answer: Callable[[ListSkusRequest], ListSkusResponse],
) -> tuple[CloudCatalogClient, FakeCatalogTransport]:
    transport = FakeCatalogTransport(answer)
    return CloudCatalogClient(transport=transport), transport


@pytest.fixture
def two_pages() -> tuple[CloudCatalogClient, FakeCatalogTransport]:
    first = page(PAGE1)
    return catalog_client(recorded({"": first, first.next_page_token: page(PAGE2)}))


def prices(points: list[PricePoint]) -> dict[tuple[str, PurchaseOption], float]:
    return {(p.instance_type, p.purchase_option): p.usd_per_hour for p in points}


def test_requests_follow_next_page_token(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, transport = two_pages
    gcp.fetch("us-central1", client=client, now=NOW)
    assert [r.page_token for r in transport.requests] == ["", page(PAGE1).next_page_token]
    first = transport.requests[0]
    assert first.parent == "services/6F81-5844-456A"
    assert first.currency_code == "USD"
    assert first.page_size == 5000


def test_a2_highgpu_on_demand_is_gpu_plus_vcpus_plus_ram(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, _ = two_pages
    points = gcp.fetch("us-central1", client=client, now=NOW)
    a2 = next(
        p
        for p in points
        if p.instance_type == "a2-highgpu-1g" and p.purchase_option is PurchaseOption.ON_DEMAND
    )
    # The opencost SKUs (2023-03-24): 1 x 2.933908 + 12 x 0.031611 + 85 x 0.004237 = 3.673385,
    # Cyclenerd's a2-highgpu-1g us-central1 price to the last digit.
    assert a2.usd_per_hour == pytest.approx(3.673385, abs=1e-9)
    assert a2.effective_date == "2023-03-24"
    assert (a2.gpu_model, a2.gpu_count, a2.gpu_memory_gb, a2.vcpus, a2.ram_gb) == (
        "A100-40GB",
        1,
        40.0,
        12,
        85.0,
    )
    assert a2.source == (
        "gcp cloudbilling list_skus services/6F81-5844-456A: "
        "gpu 039F-D0DA-4055 + cpu 2922-40C5-B19F + ram 2390-DCAF-DA38"
    )
    assert a2.provider is Provider.GCP and a2.currency == "USD" and a2.fetched_at == NOW
    table = prices(points)
    assert table[("a2-highgpu-8g", PurchaseOption.ON_DEMAND)] == pytest.approx(8 * 3.673385)


def test_spot_and_commitments_use_their_own_skus(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, _ = two_pages
    table = prices(gcp.fetch("us-central1", client=client, now=NOW))
    assert table[("a2-highgpu-1g", PurchaseOption.SPOT)] == pytest.approx(1.0 + 0.12 + 0.085)
    assert table[("a2-highgpu-1g", PurchaseOption.COMMITTED_1Y)] == pytest.approx(2.0 + 0.24 + 0.17)
    assert table[("a2-highgpu-1g", PurchaseOption.COMMITTED_3Y)] == pytest.approx(
        1.5 + 0.18 + 0.1275
    )


def test_bundled_local_ssd_is_priced_per_gib_month(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, _ = two_pages
    table = prices(gcp.fetch("us-central1", client=client, now=NOW))
    # A2 Ultra: A100 80GB + the opencost A2 core and RAM SKUs + one 375 GiB disk per GPU
    assert table[("a2-ultragpu-1g", PurchaseOption.ON_DEMAND)] == pytest.approx(
        4.0 + 12 * 0.031611 + 170 * 0.004237 + 375 * 0.073 / 730
    )
    # A3 High: 8 H100 (the tier starting at 0: 10.0, not 7.0) + 208 vCPU + 1872 GiB + 6000 GiB SSD
    assert table[("a3-highgpu-8g", PurchaseOption.ON_DEMAND)] == pytest.approx(
        8 * 10.0 + 208 * 0.01 + 1872 * 0.001 + 6000 * 0.073 / 730
    )
    assert table[("a3-highgpu-8g", PurchaseOption.COMMITTED_1Y)] == pytest.approx(
        8 * 7.0 + 208 * 0.007 + 1872 * 0.0007 + 6000 * 0.0511 / 730
    )
    # no spot H100 SKU in the pages: no spot A3 price, though spot local SSD exists
    assert ("a3-highgpu-8g", PurchaseOption.SPOT) not in table
    # A2 Ultra has no commitment local-SSD SKU here: not priced committed
    assert ("a2-ultragpu-1g", PurchaseOption.COMMITTED_1Y) not in table


def test_g2_reproduces_the_published_machine_prices(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, _ = two_pages
    points = gcp.fetch("us-central1", client=client, now=NOW)
    table = prices(points)
    # Cyclenerd pricing 2026-07-30, us-central1 (data/prices/sources/gcp_gpu_instances_...)
    published = {
        "g2-standard-4": 0.706832255,
        "g2-standard-8": 0.853624271,
        "g2-standard-12": 1.000416287,
        "g2-standard-24": 2.000832574,
        "g2-standard-48": 4.001665148,
        "g2-standard-96": 8.003330296,
    }
    for machine, usd in published.items():
        assert table[(machine, PurchaseOption.ON_DEMAND)] == pytest.approx(usd, abs=1e-8)
    g2 = next(p for p in points if p.instance_type == "g2-standard-48")
    assert (g2.gpu_model, g2.gpu_count, g2.gpu_memory_gb) == ("L4", 4, 24.0)
    # no G2 commitment SKUs in the pages: no committed G2 price rather than a wrong one
    assert ("g2-standard-4", PurchaseOption.COMMITTED_1Y) not in table


def test_a3_mega_only_where_its_gpu_is_sold(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, transport = two_pages
    central = prices(gcp.fetch("us-central1", client=client, now=NOW))
    assert not any(machine == "a3-megagpu-8g" for machine, _ in central)
    # "A3Ultra Instance Core" (99.0) must not be taken for the A3 core SKU
    assert central[("a3-highgpu-1g", PurchaseOption.ON_DEMAND)] < 20
    transport.requests.clear()
    east4 = gcp.fetch("us-east4", client=client, now=NOW, machine_types=["a3-megagpu-8g"])
    # on-demand only: there is no Mega commitment SKU, and the plain H100 one must not stand in
    assert [(p.instance_type, p.purchase_option, p.gpu_model) for p in east4] == [
        ("a3-megagpu-8g", PurchaseOption.ON_DEMAND, "H100-SXM"),
    ]
    assert east4[0].usd_per_hour == pytest.approx(
        8 * 11.0 + 208 * 0.01 + 1872 * 0.001 + 6000 * 0.073 / 730
    )
    assert "gpu FX03-0001-0004" in east4[0].source


def test_other_currencies_are_skipped_not_read_as_dollars(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport], caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = two_pages
    with caplog.at_level(logging.WARNING, logger="pricing.loaders"):
        points = gcp.fetch("asia-southeast1", client=client, now=NOW)
    assert points == []  # the A2 core SKU is in IDR: a2-highgpu is not priced there
    assert "skipped 1 SKUs priced in IDR, not USD" in caplog.text


def test_a_catalog_answering_only_in_another_currency_is_an_error() -> None:
    only_idr = page(PAGE2)
    for sku in only_idr.skus:
        for info in sku.pricing_info:
            for tier in info.pricing_expression.tiered_rates:
                tier.unit_price.currency_code = "IDR"
    client, _ = catalog_client(recorded({"": only_idr}))
    with pytest.raises(LoaderError, match="^gcp price refresh failed: the catalog answered in IDR"):
        gcp.fetch("us-central1", client=client, now=NOW)


def test_every_gpu_is_a_planner_catalog_name(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    catalog = load_catalog()
    assert {m.gpu_model for m in gcp.MACHINES.values()} <= set(catalog.gpus.names())
    client, _ = two_pages
    points = gcp.fetch(None, client=client, now=NOW)  # the default region
    assert {p.region for p in points} == {"us-central1"}
    assert len({p.key() for p in points}) == len(points)


def test_permission_denied_is_a_loader_error() -> None:
    def refuse(request: ListSkusRequest) -> ListSkusResponse:
        raise api_exceptions.PermissionDenied(  # type: ignore[no-untyped-call]
            "Cloud Billing API has not been used in project 0"
        )

    client, _ = catalog_client(refuse)
    with pytest.raises(LoaderError) as info:
        gcp.fetch("us-central1", client=client, now=NOW)
    assert info.value.provider == "gcp"
    assert str(info.value) == (
        "gcp price refresh failed: list_skus: 403 Cloud Billing API has not been used in project 0"
    )


def test_an_error_on_the_second_page_fails_the_refresh() -> None:
    first = page(PAGE1)

    def answer(request: ListSkusRequest) -> ListSkusResponse:
        if request.page_token:
            raise api_exceptions.ServiceUnavailable(  # type: ignore[no-untyped-call]
                "the service is currently unavailable"
            )
        return first

    client, transport = catalog_client(answer)
    with pytest.raises(LoaderError, match="gcp price refresh failed: list_skus: 503 the service"):
        gcp.fetch("us-central1", client=client, now=NOW)
    assert len(transport.requests) == 2


def test_unknown_machine_type() -> None:
    client, _ = catalog_client(recorded({}))
    with pytest.raises(LoaderError, match="unknown machine types \\['a9-hugegpu-1g'\\]"):
        gcp.fetch("us-central1", client=client, machine_types=["a9-hugegpu-1g"])


def test_the_package_dispatches_to_the_gcp_loader(
    two_pages: tuple[CloudCatalogClient, FakeCatalogTransport],
) -> None:
    client, _ = two_pages
    points = loaders.fetch("gcp", "us-central1", client=client, now=NOW)
    assert {p.provider for p in points} == {Provider.GCP}


def test_no_application_default_credentials_is_a_loader_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(
        LoaderError, match="^gcp price refresh failed: no usable Google credentials"
    ):
        gcp.fetch("us-central1", now=NOW)
