"""The bundled price snapshot: sourced, dated, in sane units, and read strictly."""

from __future__ import annotations

import csv
import gzip
import importlib.util
from collections import defaultdict
from datetime import date
from pathlib import Path
from types import ModuleType

import pytest

from planner.errors import InputFileError
from planner.latency.catalog import load_catalog
from pricing.model import PricePoint, Provider, PurchaseOption
from pricing.snapshot import COLUMNS, load_snapshot, snapshot_path
from tests.conftest import ROOT

SOURCES = ROOT / "data" / "prices" / "sources"

# Plausible on-demand $/GPU-hour for each GPU (list prices of the three clouds, 2024-2026).
# The cheapest instance of a GPU must fall in its band; a one-GPU instance with a big host
# (g5.16xlarge: 64 vCPUs) may cost up to HOST_FACTOR times the band's top per GPU. A unit slip
# (a monthly or per-term price taken as hourly) is 730x or 8,760x off and fails either way.
HOST_FACTOR = 3.0
ON_DEMAND_BANDS = {
    "T4": (0.3, 1.5),
    "A10G": (0.5, 3.0),
    "L4": (0.4, 2.0),
    "L40S": (1.0, 3.5),
    "A100-40GB": (1.0, 6.0),
    "A100-80GB": (1.5, 8.0),
    "H100-SXM": (1.0, 15.0),
    "H100-PCIe": (1.0, 15.0),
    "H200": (1.5, 15.0),
    "B200": (3.0, 25.0),
}


@pytest.fixture(scope="module")
def points() -> list[PricePoint]:
    return load_snapshot()


def test_snapshot_is_the_bundled_file(points: list[PricePoint]) -> None:
    assert snapshot_path() == ROOT / "data" / "prices" / "gpu_prices_snapshot.csv"
    assert len(points) == 179


def test_every_row_has_a_source_and_an_iso_date(points: list[PricePoint]) -> None:
    for p in points:
        assert p.source.strip(), p
        assert date(2026, 1, 1) <= date.fromisoformat(p.effective_date) <= date(2026, 12, 31), p
        assert p.currency == "USD"


def test_no_zero_or_negative_prices_and_no_blank_rows(points: list[PricePoint]) -> None:
    assert all(p.usd_per_hour > 0 for p in points)
    assert all(p.upfront_usd >= 0 for p in points)
    with snapshot_path().open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert all(float(r["usd_per_hour"]) > 0 for r in rows)
    assert tuple(rows[0]) == COLUMNS


def test_gpu_models_are_catalog_names_with_catalog_memory(points: list[PricePoint]) -> None:
    gpus = {g.name: g for g in load_catalog().gpus.entries}
    for p in points:
        assert p.gpu_model in gpus, p.gpu_model
        assert p.gpu_memory_gb == gpus[p.gpu_model].memory
        assert p.gpu_count in (1, 2, 4, 8, 16)


def test_on_demand_per_gpu_hour_is_in_a_plausible_band(points: list[PricePoint]) -> None:
    cheapest: dict[str, float] = {}
    for p in points:
        low, high = ON_DEMAND_BANDS[p.gpu_model]
        if p.purchase_option is PurchaseOption.ON_DEMAND:
            assert low <= p.usd_per_gpu_hour <= high * HOST_FACTOR, p.instance_type
            cheapest[p.gpu_model] = min(cheapest.get(p.gpu_model, high), p.usd_per_gpu_hour)
        else:  # discounts go to ~80% off for spot, never above the list price band
            assert low * 0.2 <= p.usd_per_gpu_hour <= high * HOST_FACTOR, p.instance_type
    for gpu, price in cheapest.items():
        low, high = ON_DEMAND_BANDS[gpu]
        assert low <= price <= high, gpu
    h100 = [p for p in points if p.gpu_model == "H100-SXM"]
    assert all(1.0 <= p.usd_per_gpu_hour <= 15.0 for p in h100)


def test_discounted_options_are_cheaper_than_on_demand(points: list[PricePoint]) -> None:
    on_demand = {
        (p.provider, p.region, p.instance_type): p.usd_per_hour
        for p in points
        if p.purchase_option is PurchaseOption.ON_DEMAND
    }
    for p in points:
        listed = on_demand.get((p.provider, p.region, p.instance_type))
        if p.purchase_option is not PurchaseOption.ON_DEMAND and listed is not None:
            assert p.usd_per_hour < listed, p


def test_the_families_the_issue_names_are_covered(points: list[PricePoint]) -> None:
    types = defaultdict(set)
    for p in points:
        types[p.provider].add(p.instance_type)
    aws = {t.split(".")[0] for t in types[Provider.AWS]}
    assert {"g5", "g6", "g6e", "p4d", "p4de", "p5", "p5en"} <= aws
    gcp = {t.rsplit("-", 1)[0] for t in types[Provider.GCP]}
    assert {"g2-standard", "a2-highgpu", "a2-ultragpu", "a3-highgpu", "a3-megagpu"} <= gcp
    assert {"Standard_ND96isr_H100_v5", "Standard_ND96isr_H200_v5"} <= types[Provider.AZURE]
    # No public, dated price was found for these: absent, never zero (see data/prices/README.md).
    assert "p5e.48xlarge" not in types[Provider.AWS]
    options = {(p.provider, p.purchase_option) for p in points}
    for option in ("on-demand", "spot", "committed-1y", "committed-3y"):
        assert (Provider.GCP, PurchaseOption(option)) in options


def test_known_prices(points: list[PricePoint]) -> None:
    by_key = {(p.instance_type, p.region, p.purchase_option.value): p for p in points}
    assert by_key["g5.2xlarge", "us-east-1", "on-demand"].usd_per_hour == 1.212
    assert by_key["p5.48xlarge", "us-east-1", "on-demand"].usd_per_gpu_hour == pytest.approx(6.88)
    sp = by_key["p5en.48xlarge", "us-east-1", "savings-plan-3y"]
    assert (sp.usd_per_hour, sp.payment, sp.plan_kind) == (23.8, "all-upfront", "instance-family")
    assert sp.upfront_usd == pytest.approx(23.8 * 3 * 8760)
    h200 = by_key["Standard_ND96isr_H200_v5", "eastus2", "reserved-3y"]
    assert h200.usd_per_hour == pytest.approx(1109592 / 26280, abs=1e-6)
    assert (h200.upfront_usd, h200.payment) == (0.0, "")  # Azure: same total upfront or monthly
    # GCP committed use is quoted per 730-hour month; the snapshot holds $/hour.
    cud = by_key["g2-standard-8", "us-central1", "committed-1y"]
    assert cud.usd_per_hour == pytest.approx(392.58179878 / 730, abs=1e-6)


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_snapshot", ROOT / "data" / "prices" / "build_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_script_reproduces_the_snapshot_from_its_bundled_sources(tmp_path: Path) -> None:
    out = tmp_path / "snapshot.csv"
    rows = _build_module().build(SOURCES, out)
    assert rows == 179
    assert out.read_bytes() == snapshot_path().read_bytes()


def test_gcp_rows_match_the_cyclenerd_file(points: list[PricePoint]) -> None:
    with gzip.open(SOURCES / "gcp_gpu_instances_cyclenerd_2026-07-30.csv.gz", "rt") as fh:
        table = {(r["machine_type"], r["region"]): r for r in csv.DictReader(fh)}
    column = {
        "on-demand": ("on_demand_usd_hr", 1.0),
        "spot": ("spot_usd_hr", 1.0),
        "committed-1y": ("cud_1y_usd_month", 730.0),
        "committed-3y": ("cud_3y_usd_month", 730.0),
    }
    for p in points:
        if p.provider is Provider.GCP:
            name, divisor = column[p.purchase_option.value]
            raw = table[p.instance_type, p.region][name]
            assert p.usd_per_hour == pytest.approx(float(raw) / divisor, abs=1e-6)


HEADER = ",".join(COLUMNS)
GOOD = "aws,us-east-1,g5.2xlarge,A10G,1,24,8,32,on-demand,1.212,0,,,USD,2026-07-20,karpenter table"


def _sheet(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "prices.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_a_good_sheet_reads(tmp_path: Path) -> None:
    [point] = load_snapshot(_sheet(tmp_path, GOOD))
    assert point.key() == ("aws", "us-east-1", "g5.2xlarge", "on-demand", "", "")
    assert (point.vcpus, point.ram_gb, point.gpu_memory_gb) == (8, 32.0, 24.0)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            GOOD.replace(",1.212,", ",0,"),
            "row 2, line 3, column 'usd_per_hour': expected a positive price, got 0",
        ),
        (
            GOOD.replace(",1.212,", ",,"),
            "row 2, line 3, column 'usd_per_hour': expected a price, got a blank",
        ),
        (
            GOOD.replace(",1.212,", ",abc,"),
            "row 2, line 3, column 'usd_per_hour': expected a number, got 'abc'",
        ),
        (
            GOOD.replace("on-demand", "monthly"),
            "row 2, line 3, column 'purchase_option': expected one of",
        ),
        (
            GOOD.replace("2026-07-20", "20/07/2026"),
            "column 'effective_date': expected an ISO date (YYYY-MM-DD), got '20/07/2026'",
        ),
        (GOOD.replace(",A10G,", ",A10,"), "column 'gpu_model': expected a planner catalog GPU"),
        (GOOD.replace(",1,24,", ",0,24,"), "column 'gpu_count': expected a whole number"),
        (GOOD.replace(",USD,", ",EUR,"), "column 'currency': prices must be in USD, got 'EUR'"),
        (GOOD.replace(",karpenter table", ","), "column 'source': expected a value"),
        (GOOD.replace("aws,", "oracle,", 1), "column 'provider': expected one of"),
        (GOOD + ",extra", "row 2, line 3: 17 fields where the header has 16"),
        (
            GOOD.replace(",on-demand,1.212,0,", ",on-demand,1.212,100,"),
            "column 'upfront_usd': on-demand has no term, so no upfront or payment",
        ),
        (
            GOOD.replace(",on-demand,1.212,0,,,", ",reserved-1y,0.5,8760,all-upfront,,"),
            "column 'usd_per_hour': all-upfront: the effective price is the upfront over the term",
        ),
        (
            GOOD.replace(",on-demand,1.212,0,,,", ",reserved-1y,0.5,0,partial-upfront,,"),
            "column 'upfront_usd': partial-upfront needs the upfront amount",
        ),
    ],
)
def test_malformed_rows_name_file_row_line_and_column(
    tmp_path: Path, row: str, message: str
) -> None:
    path = _sheet(tmp_path, GOOD.replace("g5.2xlarge", "g5.xlarge"), row)
    with pytest.raises(InputFileError) as info:
        load_snapshot(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_a_repeated_price_names_both_rows(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"row 2, line 3: the same price as row 1"):
        load_snapshot(_sheet(tmp_path, GOOD, GOOD.replace("1.212", "1.3")))


def test_header_problems(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"missing column\(s\) 'source'"):
        load_snapshot(_sheet(tmp_path, GOOD.rsplit(",", 1)[0], header=HEADER.rsplit(",", 1)[0]))
    with pytest.raises(InputFileError, match=r"column 'price': unknown column"):
        load_snapshot(_sheet(tmp_path, GOOD + ",1", header=HEADER + ",price"))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputFileError, match="empty file"):
        load_snapshot(empty)
    with pytest.raises(InputFileError, match="file not found"):
        load_snapshot(tmp_path / "missing.csv")


def test_a_comma_in_a_number_is_refused_not_deleted(tmp_path: Path) -> None:
    # "1,09" once became 109.0: no separator is guessed
    with pytest.raises(InputFileError, match=r"column 'usd_per_hour': expected a number"):
        load_snapshot(_sheet(tmp_path, GOOD.replace("1.212", '"1,09"')))
