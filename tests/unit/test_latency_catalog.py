from __future__ import annotations

import csv
import re

import pytest

from planner.errors import UsageError
from planner.latency.catalog import (
    PEAK_COLUMNS,
    Catalog,
    Precision,
    UnsupportedError,
    load_catalog,
)
from planner.paths import data_dir

CATALOG_DIR = data_dir() / "catalog"


def catalog() -> Catalog:
    return load_catalog()


def csv_rows(name: str) -> list[dict[str, str]]:
    with (CATALOG_DIR / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# --- every row loads, with its source ------------------------------------------------------


@pytest.mark.parametrize(
    ("file", "kind"),
    [("gpus.csv", "gpus"), ("models.csv", "models"), ("precisions.csv", "precisions")],
)
def test_every_catalog_row_loads_under_its_own_name(file: str, kind: str) -> None:
    rows = csv_rows(file)
    table = getattr(catalog(), kind)
    assert len(rows) > 0
    assert table.names() == [row["name"] for row in rows]
    for row in rows:
        assert table.get(row["name"]).name == row["name"]


def test_every_gpu_row_has_a_source_and_the_numbers_it_needs() -> None:
    for gpu in catalog().gpus.entries:
        assert gpu.source.strip(), gpu.name
        assert gpu.memory_gb > 0 and gpu.mem_bw_gbps > 0 and gpu.link_gbps > 0, gpu.name
        assert gpu.max_gpus_per_node >= 1, gpu.name
        assert set(gpu.peak_tflops) <= set(PEAK_COLUMNS), gpu.name
        # every chip has a 16-bit tensor peak (the half-precision attention and LM head use it)
        assert gpu.peak_tflops.get("bf16_tflops") or gpu.peak_tflops.get("fp16_tflops"), gpu.name


def test_every_model_row_has_a_source_and_a_consistent_shape() -> None:
    for model in catalog().models.entries:
        assert model.source.strip(), model.name
        assert model.attention_heads % model.kv_heads == 0, model.name
        assert 1 <= model.experts_per_token <= model.experts, model.name


def test_every_precision_names_a_known_peak_column_and_a_quality_source() -> None:
    for precision in catalog().precisions.entries:
        assert precision.compute_peak in PEAK_COLUMNS, precision.name
        assert precision.quality_source.strip(), precision.name


@pytest.mark.parametrize("kind", ["gpus", "models", "precisions"])
def test_no_alias_names_two_entries(kind: str) -> None:
    # Table keys by lower-cased name and alias; a duplicate would silently shadow an entry.
    seen: dict[str, str] = {}
    for entry in getattr(catalog(), kind).entries:
        for key in (entry.name, *entry.aliases):
            folded = key.strip().lower()
            assert seen.setdefault(folded, entry.name) == entry.name, (
                key,
                seen[folded],
                entry.name,
            )


# --- parameter counts against published sizes ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("llama-2-7b", 6.74e9),
        ("llama-2-13b", 13.0e9),
        ("llama-2-70b", 69.0e9),
        ("llama-3.1-8b", 8.03e9),
        ("llama-3.1-70b", 70.6e9),
        ("mistral-7b", 7.24e9),
        ("mixtral-8x7b", 46.7e9),
        ("qwen2.5-7b", 7.6e9),
        ("qwen2.5-72b", 72.7e9),
        ("tinyllama-1.1b", 1.1e9),
    ],
)
def test_total_parameters_match_published_sizes(name: str, published: float) -> None:
    assert catalog().models.get(name).total_params == pytest.approx(published, rel=0.02)


def test_mixtral_active_parameters_are_two_of_eight_experts() -> None:
    mixtral = catalog().models.get("mixtral-8x7b")
    assert mixtral.is_moe
    assert mixtral.active_params == pytest.approx(12.9e9, rel=0.02)
    assert (
        mixtral.total_params - mixtral.active_params == 6 * mixtral.layers * mixtral.expert_params
    )


def test_dense_models_have_all_parameters_active() -> None:
    for model in catalog().models.entries:
        if not model.is_moe:
            assert model.active_params == model.total_params, model.name


# --- lookups -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "query", "expected"),
    [
        ("gpus", "H100 80GB HBM3", "H100-SXM"),
        ("gpus", "h100-sxm", "H100-SXM"),
        ("gpus", "  H100 SXM 80GB  ", "H100-SXM"),
        ("gpus", "A100 SXM 80GB", "A100-80GB"),
        ("gpus", "H200 131GB HBM3", "H200"),
        ("gpus", "amd mi300x", "MI300X"),
        ("models", "Llama-3.3-70B-Instruct", "llama-3.1-70b"),
        ("models", "LLAMA-3.1-8B", "llama-3.1-8b"),
        ("models", "meta-llama/llama-2-7b-hf", "llama-2-7b"),
        ("models", "Mixtral-8x7B", "mixtral-8x7b"),
        ("precisions", "BF16", "bf16"),
        ("precisions", "half", "bf16"),
        ("precisions", "AWQ", "int4-awq"),
        ("precisions", "W8A8-FP8", "fp8"),
    ],
)
def test_lookup_by_alias_ignores_case_and_spaces(kind: str, query: str, expected: str) -> None:
    assert getattr(catalog(), kind).get(query).name == expected


def known_names_in(message: str) -> list[str]:
    return message.split("known ", 1)[1].split(": ", 1)[1].split(", ")


@pytest.mark.parametrize(
    ("kind", "query", "label", "closest"),
    [
        ("gpus", "H100-SMX", "GPU", "H100-SXM"),
        ("models", "lama-3.1-8b", "model", "llama-3.1-8b"),
        ("precisions", "fp9", "precision", "fp8"),
    ],
)
def test_unknown_names_raise_a_usage_error_listing_known_names_closest_first(
    kind: str, query: str, label: str, closest: str
) -> None:
    table = getattr(catalog(), kind)
    with pytest.raises(UsageError) as info:
        table.get(query)
    message = str(info.value)
    assert message.startswith(f"unknown {label} {query!r}; known {label}s: {closest}, ")
    listed = known_names_in(message)
    assert listed[0] == closest
    assert sorted(listed) == sorted(table.names())  # every known name, once


def test_suggestions_ignore_case_like_the_lookup_does() -> None:
    with pytest.raises(UsageError) as info:
        catalog().precisions.get("FP9")
    assert known_names_in(str(info.value))[0] == "fp8"


def test_closest_gpu_comes_before_its_siblings() -> None:
    with pytest.raises(UsageError) as info:
        catalog().gpus.get("H100-SMX")
    listed = known_names_in(str(info.value))
    assert listed.index("H100-SXM") < listed.index("H100-PCIe") < listed.index("T4")


# --- precisions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "weight_bytes"),
    [
        ("bf16", 2.0),
        ("fp16", 2.0),
        ("fp8", 1.0),
        ("int8", 1.0),
        # 4 bits per weight plus one FP16 scale (16 bits) per group of 128 weights:
        # (4 + 16/128) / 8 = 0.5 + 1/64
        ("int4-awq", 0.5 + 1 / 64),
    ],
)
def test_precision_weight_bytes(name: str, weight_bytes: float) -> None:
    precision: Precision = catalog().precisions.get(name)
    assert precision.weight_bytes == pytest.approx(weight_bytes, rel=1e-12)


def test_gpu_peak_is_in_flops_and_missing_units_are_unsupported() -> None:
    h100 = catalog().gpus.get("H100-SXM")
    assert h100.peak("fp8_tflops") == pytest.approx(1978.9e12, rel=1e-12)
    assert h100.bandwidth == pytest.approx(3350e9, rel=1e-12)
    assert h100.memory_bytes == pytest.approx(80e9, rel=1e-12)
    with pytest.raises(UnsupportedError, match=re.escape("A100-80GB has no FP8 tensor-core peak")):
        catalog().gpus.get("A100-80GB").peak("fp8_tflops")
    assert issubclass(UnsupportedError, UsageError)
