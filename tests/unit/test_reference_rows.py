"""Self-check of the published reference measurements in ``data/reference/published_latency.csv``.

Every row must carry its source, name an engine, a metric with a unit that fits it, a positive
finite value, and a model and GPU that the bundled catalogs know; two rows describing the same
configuration with different values must come from different sources or software versions.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest

from planner.latency.calibration import MEASUREMENT_COLUMNS

DATA = Path(__file__).resolve().parents[2] / "data"
REFERENCE = DATA / "reference" / "published_latency.csv"
CATALOG = DATA / "catalog"

HEADER = list(MEASUREMENT_COLUMNS)
ENGINES = {"trtllm", "vllm", "sglang"}
LATENCY_METRICS = {"ttft", "itl", "tpot", "e2e"}
UNITS = {
    **{metric: {"ms", "s"} for metric in LATENCY_METRICS},
    "output_throughput": {"tok/s"},
    "request_throughput": {"req/s"},
}
PRECISIONS = {"bf16", "fp16", "fp8", "int8", "int4-awq", "fp4"}
KV_CACHES = {"fp16", "bf16", "fp8"}
LOAD = re.compile(r"^(\d+|max|(qps|concurrency|batch)=(\d+(\.\d+)?|inf))$", re.IGNORECASE)
PER_GPU_NOTE = re.compile(r"table value ([\d,]+) tok/s per GPU .*? x TP(\d+) = ([\d,]+) tok/s")


def _rows() -> list[dict[str, str]]:
    with REFERENCE.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == HEADER
        return list(reader)


ROWS = _rows()


def _where(index: int) -> str:
    return f"{REFERENCE.name} data row {index + 1}"


def _names(path: Path) -> dict[str, dict[str, str]]:
    """Catalog rows by lower-cased name and alias."""
    by_key: dict[str, dict[str, str]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            for key in [row["name"], *row["aliases"].split(",")]:
                if key.strip():
                    by_key[key.strip().lower()] = row
    return by_key


def _lookup(table: dict[str, dict[str, str]], text: str) -> dict[str, str] | None:
    """The catalog row for ``text``, also trying it without a parenthesised remark."""
    for key in (text, re.sub(r"\s*\(.*\)", "", text)):
        if key.strip().lower() in table:
            return table[key.strip().lower()]
    return None


def _metric(row: dict[str, str]) -> str:
    return row["metric"].strip().lower().removeprefix("mean_")


def test_has_rows_from_each_engine() -> None:
    assert len(ROWS) >= 100
    assert {row["engine"] for row in ROWS} == ENGINES


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_row_is_complete_and_consistent(index: int) -> None:
    row, where = ROWS[index], _where(index)
    assert row["source"].strip(), f"{where}: empty source"
    url = row["url_or_path"].strip()
    assert url.startswith("https://"), f"{where}: url_or_path {url!r} is not an https URL"
    assert row["engine"] in ENGINES, f"{where}: engine {row['engine']!r}"
    metric = _metric(row)
    assert metric in UNITS, f"{where}: metric {row['metric']!r}"
    assert row["unit"] in UNITS[metric], f"{where}: unit {row['unit']!r} for metric {metric}"
    value = float(row["value"])
    assert math.isfinite(value) and value > 0, f"{where}: value {row['value']!r}"
    assert row["precision"].lower() in PRECISIONS, f"{where}: precision {row['precision']!r}"
    assert row["kv_cache"].lower() in KV_CACHES, f"{where}: kv_cache {row['kv_cache']!r}"
    gpus = int(row["num_gpus"])
    assert gpus in (1, 2, 4, 8), f"{where}: num_gpus {gpus} is not a TP degree in one node"
    assert LOAD.match(row["batch_or_concurrency"]), f"{where}: load {row['batch_or_concurrency']!r}"
    assert int(row["input_len"]) >= 1 and int(row["output_len"]) >= 1, where
    assert row["framework"].strip(), f"{where}: empty framework"
    if metric in ("output_throughput", "request_throughput"):
        assert row["notes"].strip(), f"{where}: throughput rows must say how they were measured"


@pytest.mark.parametrize("index", range(len(ROWS)))
def test_model_and_gpu_are_in_the_catalogs(index: int) -> None:
    row, where = ROWS[index], _where(index)
    gpu = _lookup(_names(CATALOG / "gpus.csv"), row["gpu"])
    assert gpu is not None, f"{where}: GPU {row['gpu']!r} is not in data/catalog/gpus.csv"
    assert int(row["num_gpus"]) <= int(gpu["max_gpus_per_node"]), where
    model = _lookup(_names(CATALOG / "models.csv"), row["model"])
    assert model is not None, f"{where}: model {row['model']!r} is not in data/catalog/models.csv"
    tokens = int(row["input_len"]) + int(row["output_len"])
    assert tokens <= int(model["max_context"]), (
        f"{where}: {tokens} tokens exceed the {model['max_context']}-token context of {model['name']}"
    )


def test_per_gpu_tables_were_scaled_to_one_instance() -> None:
    """Rows converted from tokens/s per GPU say so, and the product is right."""
    converted = 0
    for index, row in enumerate(ROWS):
        found = PER_GPU_NOTE.search(row["notes"])
        if not found:
            continue
        per_gpu, tp, total = (int(group.replace(",", "")) for group in found.groups())
        where = _where(index)
        assert tp == int(row["num_gpus"]), f"{where}: note TP{tp} vs num_gpus {row['num_gpus']}"
        assert per_gpu * tp == total == float(row["value"]), f"{where}: {per_gpu} x {tp} != value"
        converted += 1
    assert converted >= 1


def test_same_configuration_differs_only_across_sources_or_versions() -> None:
    """Two rows with the same key and different values must come from different sources
    or different software versions, and both must carry notes that say what they are."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for index, row in enumerate(ROWS):
        key = tuple(
            row[column].strip().lower()
            for column in (
                "model",
                "gpu",
                "num_gpus",
                "precision",
                "engine",
                "input_len",
                "output_len",
                "batch_or_concurrency",
                "metric",
            )
        )
        groups[key].append(index)
    for key, indices in groups.items():
        values = {float(ROWS[i]["value"]) for i in indices}
        if len(values) < 2:
            continue
        origins = {(ROWS[i]["url_or_path"], ROWS[i]["framework"]) for i in indices}
        assert len(origins) == len(indices), f"{key}: rows {indices} repeat one source and version"
        for i in indices:
            assert ROWS[i]["notes"].strip(), f"{_where(i)}: duplicate key without notes"


def test_offline_rows_are_throughput() -> None:
    """Load ``max`` (offline, engine-chosen batch) only goes with a throughput metric."""
    for index, row in enumerate(ROWS):
        if row["batch_or_concurrency"].lower() == "max":
            assert _metric(row) in ("output_throughput", "request_throughput"), _where(index)
