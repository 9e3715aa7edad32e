"""Rebuild ``gpu_prices_snapshot.csv`` from the public figures bundled in ``sources/`` beside it.

    python data/prices/build_snapshot.py [SOURCES_DIR]

Only figures with a public, dated source are written; an unknown price is left out (no row),
never written as zero. What was taken, converted or left out, and why: README.md beside this file.
The output is deterministic: rerunning on the same inputs gives the same bytes.
"""

from __future__ import annotations

import csv
import gzip
import re
import sys
from pathlib import Path
from typing import TextIO

from pricing.snapshot import COLUMNS  # one definition of a price sheet's columns

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOURCES = HERE / "sources"  # the gathered public files, unchanged (the GCP one gzipped)
OUTPUT = HERE / "gpu_prices_snapshot.csv"
GPU_CATALOG = ROOT / "data" / "catalog" / "gpus.csv"


HOURS_PER_MONTH = 730  # the month the GCP committed-use figures are quoted for
HOURS_3Y = 3 * 8760

KARPENTER_FILE = "aws_on_demand_gpu_karpenter_2026-07-20.csv"
CYCLENERD_FILE = "gcp_gpu_instances_cyclenerd_2026-07-30.csv.gz"

AWS_OD_SOURCE = (
    "aws/karpenter-provider-aws@1d927085 pkg/providers/pricing/zz_generated.pricing_aws.go "
    "(AWS Price List on-demand Linux prices, generated 2026-07-20T13:44:30Z for us-east-1; "
    "Apache-2.0)"
)
AWS_OD_DATE = "2026-07-20"
GCP_SOURCE = (
    "Cyclenerd/google-cloud-pricing-cost-calculator@fd66b26 pricing.yml "
    "(Cloud Billing Catalog SKUs, generated 2026-07-30; Apache-2.0)"
)
GCP_CUD_NOTE = "; committed use quoted per month of 730 h, converted: monthly / 730"
GCP_DATE = "2026-07-30"

# AWS instance shapes: GPU (planner catalog name), GPUs, vCPUs, RAM GiB. From the EC2
# accelerated-computing instance specifications (the same figures Karpenter's
# instance-types reference lists from DescribeInstanceTypes).
AWS_SHAPES: dict[str, tuple[str, int, int, int]] = {
    "g4dn.xlarge": ("T4", 1, 4, 16),
    "g4dn.2xlarge": ("T4", 1, 8, 32),
    "g4dn.4xlarge": ("T4", 1, 16, 64),
    "g4dn.8xlarge": ("T4", 1, 32, 128),
    "g4dn.16xlarge": ("T4", 1, 64, 256),
    "g4dn.12xlarge": ("T4", 4, 48, 192),
    "g4dn.metal": ("T4", 8, 96, 384),
    "g5.xlarge": ("A10G", 1, 4, 16),
    "g5.2xlarge": ("A10G", 1, 8, 32),
    "g5.4xlarge": ("A10G", 1, 16, 64),
    "g5.8xlarge": ("A10G", 1, 32, 128),
    "g5.16xlarge": ("A10G", 1, 64, 256),
    "g5.12xlarge": ("A10G", 4, 48, 192),
    "g5.24xlarge": ("A10G", 4, 96, 384),
    "g5.48xlarge": ("A10G", 8, 192, 768),
    "g6.xlarge": ("L4", 1, 4, 16),
    "g6.2xlarge": ("L4", 1, 8, 32),
    "g6.4xlarge": ("L4", 1, 16, 64),
    "g6.8xlarge": ("L4", 1, 32, 128),
    "g6.16xlarge": ("L4", 1, 64, 256),
    "g6.12xlarge": ("L4", 4, 48, 192),
    "g6.24xlarge": ("L4", 4, 96, 384),
    "g6.48xlarge": ("L4", 8, 192, 768),
    "g6e.xlarge": ("L40S", 1, 4, 32),
    "g6e.2xlarge": ("L40S", 1, 8, 64),
    "g6e.4xlarge": ("L40S", 1, 16, 128),
    "g6e.8xlarge": ("L40S", 1, 32, 256),
    "g6e.16xlarge": ("L40S", 1, 64, 512),
    "g6e.12xlarge": ("L40S", 4, 48, 384),
    "g6e.24xlarge": ("L40S", 4, 96, 768),
    "g6e.48xlarge": ("L40S", 8, 192, 1536),
    "p4d.24xlarge": ("A100-40GB", 8, 96, 1152),
    "p4de.24xlarge": ("A100-80GB", 8, 96, 1152),
    "p5.4xlarge": ("H100-SXM", 1, 16, 256),
    "p5.48xlarge": ("H100-SXM", 8, 192, 2048),
    # p5e.48xlarge (8 x H200): no dated public price in the gathered data, so no row.
    "p5en.48xlarge": ("H200", 8, 192, 2048),
    "p6-b200.48xlarge": ("B200", 8, 192, 2048),
}

# GCP machine types: GPU, GPUs (vCPUs and RAM come from the pricing file).
GCP_SHAPES: dict[str, tuple[str, int]] = {
    "g2-standard-4": ("L4", 1),
    "g2-standard-8": ("L4", 1),
    "g2-standard-12": ("L4", 1),
    "g2-standard-16": ("L4", 1),
    "g2-standard-32": ("L4", 1),
    "g2-standard-24": ("L4", 2),
    "g2-standard-48": ("L4", 4),
    "g2-standard-96": ("L4", 8),
    "a2-highgpu-1g": ("A100-40GB", 1),
    "a2-highgpu-2g": ("A100-40GB", 2),
    "a2-highgpu-4g": ("A100-40GB", 4),
    "a2-highgpu-8g": ("A100-40GB", 8),
    "a2-megagpu-16g": ("A100-40GB", 16),
    "a2-ultragpu-1g": ("A100-80GB", 1),
    "a2-ultragpu-2g": ("A100-80GB", 2),
    "a2-ultragpu-4g": ("A100-80GB", 4),
    "a2-ultragpu-8g": ("A100-80GB", 8),
    "a3-highgpu-1g": ("H100-SXM", 1),
    "a3-highgpu-2g": ("H100-SXM", 2),
    "a3-highgpu-4g": ("H100-SXM", 4),
    "a3-highgpu-8g": ("H100-SXM", 8),
    "a3-megagpu-8g": ("H100-SXM", 8),
}
GCP_REGIONS = ("us-central1", "us-east4")
# Google sells A3 High with 1, 2 or 4 GPUs only as Spot (or Flex-start) VMs: the catalogue's
# on-demand and committed figures for them are arithmetic, not something one can buy.
GCP_SPOT_ONLY = {"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"}


def _price(value: float) -> str:
    """Dollars to the micro-dollar, without trailing zeros."""
    return f"{value:.6f}".rstrip("0").rstrip(".")


# Rows that are not in the two machine-generated tables, each with its own source and date.
AZURE_H100_SOURCE = (
    "https://prices.azure.com/api/retail/prices Standard_ND96isr_H100_v5 eastus, Linux meter "
    "'{meter}' (items captured 2026-09-16 in a public test fixture; see "
    "shared/data/prices/api_samples/azure_retail_prices_items.json)"
)
EXTRA_ROWS: list[dict[str, str]] = [
    {
        "provider": "aws",
        "region": "us-east-1",
        "instance_type": "p5en.48xlarge",
        "purchase_option": "savings-plan-3y",
        "usd_per_hour": "23.8",
        "upfront_usd": _price(23.80 * HOURS_3Y),
        "payment": "all-upfront",
        "plan_kind": "instance-family",
        "effective_date": "2026-10-03",
        "source": (
            "https://pricing.us-east-1.amazonaws.com/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/"
            "current/region_index.json version 20261003071546: 3-year EC2 Instance Savings Plan, "
            "All Upfront, 23.80 USD/h (second-hand: quoted by a public appendix citing that file)"
        ),
    },
    {
        "provider": "azure",
        "region": "eastus",
        "instance_type": "Standard_ND96isr_H100_v5",
        "purchase_option": "on-demand",
        "usd_per_hour": "98.32",
        "effective_date": "2026-09-16",
        "source": AZURE_H100_SOURCE.format(meter="ND96isrH100v5"),
    },
    {
        "provider": "azure",
        "region": "eastus",
        "instance_type": "Standard_ND96isr_H100_v5",
        "purchase_option": "spot",
        "usd_per_hour": "18.169536",
        "effective_date": "2026-09-16",
        "source": AZURE_H100_SOURCE.format(meter="ND96isrH100v5 Spot"),
    },
    {
        "provider": "azure",
        "region": "eastus2",
        "instance_type": "Standard_ND96isr_H200_v5",
        "purchase_option": "reserved-3y",
        # Azure bills a reservation's total upfront or monthly, at the same price: no upfront
        # is recorded (as the live Azure loader does); the hourly price is the term total / h.
        "usd_per_hour": _price(1109592 / HOURS_3Y),
        "effective_date": "2026-10-03",
        "source": (
            "https://prices.azure.com/api/retail/prices Standard_ND96isr_H200_v5 eastus2, "
            "3-year reservation 1,109,592 USD per term / 26,280 h (second-hand: quoted by a "
            "public appendix, 'Azure 2026', month not stated; dated by the AWS price file of "
            "2026-10-03 the same appendix cites)"
        ),
    },
]
AZURE_SHAPES: dict[str, tuple[str, int, int]] = {
    # GPU, GPUs, vCPUs (from the size name); RAM left blank: no source in the gathered data.
    "Standard_ND96isr_H100_v5": ("H100-SXM", 8, 96),
    "Standard_ND96isr_H200_v5": ("H200", 8, 96),
}


def _gpu_memory() -> dict[str, str]:
    with GPU_CATALOG.open(newline="", encoding="utf-8") as fh:
        return {row["name"]: row["memory"] for row in csv.DictReader(fh)}


def _row(**values: str) -> dict[str, str]:
    row = dict.fromkeys(COLUMNS, "")
    row.update(values)
    row["currency"] = "USD"
    row["upfront_usd"] = row["upfront_usd"] or "0"
    return row


def open_source(path: Path) -> TextIO:
    """A source file as text, gunzipped when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return path.open(newline="", encoding="utf-8")


def aws_rows(sources: Path, memory: dict[str, str]) -> list[dict[str, str]]:
    with open_source(sources / KARPENTER_FILE) as fh:
        prices = {
            (r["region"], r["instance_type"]): r["on_demand_usd_hr"] for r in csv.DictReader(fh)
        }
    rows = []
    for instance, (gpu, count, vcpus, ram) in AWS_SHAPES.items():
        price = prices.get(("us-east-1", instance), "")
        if not price or float(price) <= 0:
            continue
        rows.append(
            _row(
                provider="aws",
                region="us-east-1",
                instance_type=instance,
                gpu_model=gpu,
                gpu_count=str(count),
                gpu_memory_gb=memory[gpu],
                vcpus=str(vcpus),
                ram_gb=str(ram),
                purchase_option="on-demand",
                usd_per_hour=_price(float(price)),
                effective_date=AWS_OD_DATE,
                source=AWS_OD_SOURCE,
            )
        )
    return rows


def gcp_rows(sources: Path, memory: dict[str, str]) -> list[dict[str, str]]:
    with open_source(sources / CYCLENERD_FILE) as fh:
        table = {(r["machine_type"], r["region"]): r for r in csv.DictReader(fh)}
    rows = []
    for region in GCP_REGIONS:
        for machine, (gpu, count) in GCP_SHAPES.items():
            found = table.get((machine, region))
            if found is None:
                continue
            options = [
                ("on-demand", found["on_demand_usd_hr"], 1.0, ""),
                ("spot", found["spot_usd_hr"], 1.0, ""),
                ("committed-1y", found["cud_1y_usd_month"], HOURS_PER_MONTH, GCP_CUD_NOTE),
                ("committed-3y", found["cud_3y_usd_month"], HOURS_PER_MONTH, GCP_CUD_NOTE),
            ]
            for option, raw, divisor, note in options:
                if not raw.strip() or float(raw) <= 0:
                    continue  # blank stays blank
                if machine in GCP_SPOT_ONLY and option != "spot":
                    continue
                rows.append(
                    _row(
                        provider="gcp",
                        region=region,
                        instance_type=machine,
                        gpu_model=gpu,
                        gpu_count=str(count),
                        gpu_memory_gb=memory[gpu],
                        vcpus=found["vcpus"],
                        ram_gb=found["ram_gb"],
                        purchase_option=option,
                        usd_per_hour=_price(float(raw) / divisor),
                        effective_date=GCP_DATE,
                        source=GCP_SOURCE + note,
                    )
                )
    return rows


def extra_rows(memory: dict[str, str]) -> list[dict[str, str]]:
    rows = []
    for extra in EXTRA_ROWS:
        instance = extra["instance_type"]
        if extra["provider"] == "aws":
            gpu, count, vcpus, ram = AWS_SHAPES[instance]
            shape = {"vcpus": str(vcpus), "ram_gb": str(ram)}
        else:
            gpu, count, vcpu_count = AZURE_SHAPES[instance]
            shape = {"vcpus": str(vcpu_count)}
        rows.append(
            _row(
                **extra,
                **shape,
                gpu_model=gpu,
                gpu_count=str(count),
                gpu_memory_gb=memory[gpu],
            )
        )
    return rows


def build(sources: Path = SOURCES, output: Path = OUTPUT) -> int:
    memory = _gpu_memory()
    rows = aws_rows(sources, memory) + gcp_rows(sources, memory) + extra_rows(memory)
    order = {"on-demand": 0, "spot": 1}
    rows.sort(
        key=lambda r: (
            r["provider"],
            r["region"],
            re.sub(r"[.-][^.-]*$", "", r["instance_type"]),  # family: g5, a2-highgpu
            int(r["gpu_count"]),
            int(r["vcpus"]),
            r["instance_type"],
            order.get(r["purchase_option"], 2),
            r["purchase_option"],
        )
    )
    with output.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCES
    print(f"wrote {build(source)} rows to {OUTPUT}")
