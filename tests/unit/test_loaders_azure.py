"""The Azure loader over real HTTP: a loopback server (127.0.0.1, a free port) serves recorded
Retail Prices pages whose NextPageLink points back at it. No mock of urllib or of the loader.

Pages: tests/fixtures/prices/azure/ (see the README there).
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from planner.latency.catalog import load_catalog
from pricing import loaders
from pricing.loaders import LoaderError, azure
from pricing.model import PricePoint, Provider, PurchaseOption

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prices" / "azure"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

#: scenario -> (first page, page after "$skip=100")
SCENARIOS = {
    "eastus": ("eastus_page1.json", "eastus_page2.json"),
    "eastus2": ("eastus2_page1.json", None),
    "malformed": ("eastus_page1.json", "malformed_page2.json"),
    "offsite": ("eastus_page1.json", None),
    "flaky": ("eastus2_page1.json", None),
}


class PriceServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), PriceHandler)
        self.requests: list[str] = []
        self.failures_left = {"flaky": 1}

    @property
    def root(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, scenario: str) -> str:
        return f"{self.root}/{scenario}/api/retail/prices"


class PriceHandler(BaseHTTPRequestHandler):
    server: PriceServer

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        url = urllib.parse.urlsplit(self.path)
        scenario = url.path.split("/")[1]
        if scenario == "error500":
            return self.reply(500, (FIXTURES / "error_500.json").read_bytes())
        if self.server.failures_left.get(scenario, 0) > 0:
            self.server.failures_left[scenario] -= 1
            return self.reply(503, b"", {"Retry-After": "0"})
        first, second = SCENARIOS[scenario]
        name = second if "$skip=100" in urllib.parse.unquote(url.query) else first
        if name is None:
            return self.reply(404, b'{"Error": {"Code": "NotFound", "Message": "no such page"}}')
        body = (FIXTURES / name).read_text()
        if scenario == "offsite":
            body = body.replace("{base}", "https://prices.example.invalid/api/retail/prices")
        body = body.replace("{base}", self.server.base_url(scenario))
        self.reply(200, body.encode())

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[PriceServer]:
    srv = PriceServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def fetch(
    server: PriceServer,
    scenario: str,
    region: str = "eastus",
    *,
    retries: int = 0,
    backoff_s: float = 0.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[PricePoint]:
    return azure.fetch(
        region,
        base_url=server.base_url(scenario),
        now=NOW,
        timeout=5.0,
        retries=retries,
        backoff_s=backoff_s,
        sleep=sleep,
    )


def by_option(points: list[PricePoint], size: str) -> dict[PurchaseOption, PricePoint]:
    chosen = [p for p in points if p.instance_type == size]
    table = {p.purchase_option: p for p in chosen}
    assert len(table) == len(chosen)
    return table


def test_two_pages_over_http_with_the_filter_sent(server: PriceServer) -> None:
    fetch(server, "eastus")
    assert len(server.requests) == 2
    first = urllib.parse.urlsplit(server.requests[0])
    query = urllib.parse.parse_qs(first.query)
    assert query["api-version"] == ["2023-01-01-preview"]
    (odata,) = query["$filter"]
    assert odata.startswith(
        "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' and "
        "(armSkuName eq 'Standard_NV36ads_A10_v5' or "
    )
    for size in azure.SIZES:
        assert f"armSkuName eq '{size}'" in odata
    assert "$skip=100" in urllib.parse.unquote(server.requests[1])  # NextPageLink followed


def test_linux_consumption_spot_and_what_is_dropped(server: PriceServer) -> None:
    h100 = by_option(fetch(server, "eastus"), "Standard_ND96isr_H100_v5")
    # the Windows row (102.736) and the Low Priority row (41.094) are dropped
    assert set(h100) == {PurchaseOption.ON_DEMAND, PurchaseOption.SPOT}
    on_demand, spot = h100[PurchaseOption.ON_DEMAND], h100[PurchaseOption.SPOT]
    assert on_demand.usd_per_hour == 98.32
    assert spot.usd_per_hour == 18.169536
    assert (on_demand.gpu_model, on_demand.gpu_count, on_demand.gpu_memory_gb) == (
        "H100-SXM",
        8,
        80.0,
    )
    assert on_demand.usd_per_gpu_hour == pytest.approx(12.29)
    assert (on_demand.vcpus, on_demand.ram_gb) == (96, 1900.0)
    assert on_demand.provider is Provider.AZURE and on_demand.region == "eastus"
    assert on_demand.effective_date == "2026-11-29"  # the trimmed rows carry no date: fetch day
    assert "Virtual Machines NDsr H100 v5 Series" in on_demand.source


def test_reservations_are_whole_term_prices_and_savings_plans_hourly(server: PriceServer) -> None:
    points = fetch(server, "eastus")
    nc = by_option(points, "Standard_NC24ads_A100_v4")
    # group A values (B16als_v2's, rekeyed onto this size): see the fixture README
    assert nc[PurchaseOption.ON_DEMAND].usd_per_hour == 0.673
    assert nc[PurchaseOption.RESERVED_1Y].usd_per_hour == pytest.approx(3478.0 / 8760)
    assert nc[PurchaseOption.RESERVED_1Y].upfront_usd == 0.0
    assert nc[PurchaseOption.SAVINGS_PLAN_1Y].usd_per_hour == 0.49129
    assert nc[PurchaseOption.SAVINGS_PLAN_3Y].usd_per_hour == 0.34323
    assert {
        nc[o].plan_kind for o in (PurchaseOption.SAVINGS_PLAN_1Y, PurchaseOption.SAVINGS_PLAN_3Y)
    } == {"compute"}
    assert nc[PurchaseOption.RESERVED_1Y].effective_date == "2023-09-01"
    assert PurchaseOption.SPOT not in nc  # its only discounted row is Low Priority: dropped
    assert "DZH318Z0K9JH/03RM" in nc[PurchaseOption.RESERVED_1Y].source
    # the verbatim B16als_v2 rows (another size, another region) gave nothing
    assert {p.instance_type for p in points} == {
        "Standard_ND96isr_H100_v5",
        "Standard_NC24ads_A100_v4",
    }
    assert len(points) == 2 + 4


def test_a_three_year_reservation_total_becomes_hourly(server: PriceServer) -> None:
    points = fetch(server, "eastus2", region="eastus2")
    # the EUR row and the DevTest row are skipped
    assert len(points) == 1
    h200 = points[0]
    assert (h200.instance_type, h200.purchase_option) == (
        "Standard_ND96isr_H200_v5",
        PurchaseOption.RESERVED_3Y,
    )
    assert h200.usd_per_hour == pytest.approx(1109592 / 26280)  # 42.222 $/h, not 1.1 M$/h
    assert h200.usd_per_hour == pytest.approx(42.222, abs=1e-3)
    assert (h200.gpu_model, h200.gpu_memory_gb, h200.currency) == ("H200", 141.0, "USD")


def test_http_500_is_a_loader_error_after_retries(server: PriceServer) -> None:
    slept: list[float] = []
    with pytest.raises(LoaderError) as info:
        fetch(server, "error500", retries=2, backoff_s=0.5, sleep=slept.append)
    assert len(server.requests) == 3
    assert slept == [0.5, 1.0]
    assert info.value.provider == "azure"
    assert str(info.value) == (
        f"azure price refresh failed: HTTP 500 Internal Server Error from "
        f"{server.base_url('error500')} (InternalServerError: Something went wrong)"
    )


def test_a_503_is_retried_honouring_retry_after(server: PriceServer) -> None:
    slept: list[float] = []
    points = fetch(server, "flaky", region="eastus2", retries=1, backoff_s=9.0, sleep=slept.append)
    assert slept == [0.0]  # Retry-After: 0 from the server, not the 9 s backoff
    assert len(points) == 1 and len(server.requests) == 2


def test_malformed_json_is_a_loader_error(server: PriceServer) -> None:
    with pytest.raises(
        LoaderError,
        match="^azure price refresh failed: malformed JSON on page 2 from http://127.0.0.1:",
    ):
        fetch(server, "malformed")
    assert len(server.requests) == 2


def test_next_page_link_to_another_host_is_not_followed(server: PriceServer) -> None:
    with pytest.raises(
        LoaderError, match="NextPageLink leaves .* https://prices.example.invalid/api/retail/prices"
    ):
        fetch(server, "offsite")
    assert len(server.requests) == 1


def test_unreachable_host_is_a_loader_error(server: PriceServer) -> None:
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    with pytest.raises(
        LoaderError, match="^azure price refresh failed: cannot reach http://127.0.0.1:"
    ):
        azure.fetch(
            "eastus", base_url=f"http://127.0.0.1:{port}/api/retail/prices", retries=0, timeout=2.0
        )


def test_sizes_map_to_planner_catalog_gpus() -> None:
    catalog = load_catalog()
    assert {s.gpu_model for s in azure.SIZES.values()} <= set(catalog.gpus.names())
    with pytest.raises(LoaderError, match="unknown VM sizes \\['Standard_NV6ads_A10_v5'\\]"):
        azure.fetch("eastus", sizes=["Standard_NV6ads_A10_v5"])


def test_the_package_dispatches_to_the_azure_loader(server: PriceServer) -> None:
    points = loaders.fetch(
        Provider.AZURE, "eastus2", base_url=server.base_url("eastus2"), now=NOW, retries=0
    )
    assert [p.instance_type for p in points] == ["Standard_ND96isr_H200_v5"]
