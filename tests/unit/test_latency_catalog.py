from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from planner.errors import UsageError
from planner.latency.catalog import (
    GIB,
    MEMORY_UNITS,
    PEAK_COLUMNS,
    Catalog,
    CatalogError,
    Precision,
    UnsupportedError,
    load_catalog,
    load_gpus,
    load_precisions,
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
        assert gpu.memory > 0 and gpu.mem_bw_gbps > 0, gpu.name
        # a link only matters where the device can be split (tensor parallelism)
        assert gpu.link_gbps > 0 or gpu.max_gpus_per_node == 1, gpu.name
        assert gpu.memory_unit in MEMORY_UNITS, gpu.name
        # the driver reserves part of the nominal capacity, never adds to it
        assert 0 < gpu.memory_bytes <= gpu.nominal_memory_bytes, gpu.name
        assert gpu.max_gpus_per_node >= 1, gpu.name
        assert set(gpu.peak_tflops) <= set(PEAK_COLUMNS), gpu.name
        # every chip has a 16-bit tensor peak (the half-precision attention and LM head use
        # it), or is a CPU that runs FP32 models only
        half = gpu.peak_tflops.get("bf16_tflops") or gpu.peak_tflops.get("fp16_tflops")
        assert half or set(gpu.peak_tflops) == {"fp32_tflops"}, gpu.name


def test_every_gpu_row_says_how_its_memory_unit_is_known() -> None:
    for row in csv_rows("gpus.csv"):
        assert row["memory_note"].strip(), row["name"]
        if row["device_memory_mib"].strip() and "seen by the kernel" not in row["memory_note"]:
            # a driver figure is cited with the public page that shows it (a CPU's is read off
            # the machine measured, as its source says)
            assert "https://" in row["memory_note"], row["name"]


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
        ("llama-3.1-405b", 405e9),
        ("mistral-7b", 7.24e9),
        ("mixtral-8x7b", 46.7e9),
        ("mixtral-8x22b", 141e9),
        ("qwen3-30b-a3b", 30.5e9),
        ("qwen2.5-7b", 7.6e9),
        ("qwen2.5-72b", 72.7e9),
        ("tinyllama-1.1b", 1.1e9),
    ],
)
def test_total_parameters_match_published_sizes(name: str, published: float) -> None:
    assert catalog().models.get(name).total_params == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(
    ("name", "experts", "top_k", "published_active"),
    [
        ("mixtral-8x7b", 8, 2, 12.9e9),
        ("mixtral-8x22b", 8, 2, 39e9),
        ("qwen3-30b-a3b", 128, 8, 3.3e9),
    ],
)
def test_moe_active_parameters_are_the_top_k_experts(
    name: str, experts: int, top_k: int, published_active: float
) -> None:
    model = catalog().models.get(name)
    assert model.is_moe
    assert (model.experts, model.experts_per_token) == (experts, top_k)
    assert model.active_params == pytest.approx(published_active, rel=0.02)
    unused = (experts - top_k) * model.layers * model.expert_params
    assert model.total_params - model.active_params == unused


def test_qwen3_moe_attention_uses_heads_times_head_dim_not_hidden_size() -> None:
    # 32 query heads x 128 = 4096 != hidden 2048: Q and O are 2048 x 4096, K and V 2048 x 512
    qwen = catalog().models.get("qwen3-30b-a3b")
    assert qwen.attention_heads * qwen.head_dim != qwen.hidden_size
    assert qwen.attention_params_per_layer == 2 * 2048 * 4096 + 2 * 2048 * 512  # 18,874,368
    assert qwen.expert_params == 3 * 2048 * 768  # moe_intermediate_size, not 6144


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
        ("models", "mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
        ("models", "Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("models", "meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b"),
        ("gpus", "NVIDIA H100 NVL", "H100-NVL"),
        ("gpus", "NVIDIA GH200 480GB", "GH200-96GB"),
        ("gpus", "GH200 144G HBM3e", "GH200-144GB"),
        ("gpus", "nvidia a40", "A40"),
        ("precisions", "NVFP4", "fp4"),
        ("precisions", "w4a4-fp4", "fp4"),
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
        # NVFP4: 4 bits plus one FP8 scale (8 bits) per 16 weights: (4 + 8/16) / 8 = 0.5625
        ("fp4", 0.5625),
    ],
)
def test_precision_weight_bytes(name: str, weight_bytes: float) -> None:
    precision: Precision = catalog().precisions.get(name)
    assert precision.weight_bytes == pytest.approx(weight_bytes, rel=1e-12)


def test_gpu_peak_is_in_flops_and_missing_units_are_unsupported() -> None:
    h100 = catalog().gpus.get("H100-SXM")
    assert h100.peak("fp8_tflops") == pytest.approx(1978.9e12, rel=1e-12)
    assert h100.bandwidth == pytest.approx(3350e9, rel=1e-12)
    with pytest.raises(UnsupportedError, match=re.escape("A100-80GB has no FP8 tensor-core peak")):
        catalog().gpus.get("A100-80GB").peak("fp8_tflops")
    assert issubclass(UnsupportedError, UsageError)


def test_fp4_runs_on_fp4_tensor_cores_only() -> None:
    fp4 = catalog().precisions.get("fp4")
    assert (fp4.weight_bits, fp4.scale_bits_per_weight, fp4.compute_peak) == (4, 0.5, "fp4_tflops")
    assert catalog().gpus.get("B200").peak("fp4_tflops") == pytest.approx(9000e12, rel=1e-12)
    with_fp4 = [g.name for g in catalog().gpus.entries if "fp4_tflops" in g.peak_tflops]
    assert with_fp4 == ["B200"]
    with pytest.raises(UnsupportedError, match=re.escape("H200 has no FP4 tensor-core peak")):
        catalog().gpus.get("H200").peak(fp4.compute_peak)


# --- memory units ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "memory_bytes"),
    [
        # the driver's totals (nvidia-smi / rocminfo MiB) x 2**20
        ("A100-80GB", 81920 * 1048576),  # 85,899,345,920 B = exactly 80 GiB
        ("H100-SXM", 81559 * 1048576),  # 85,520,809,984 B = 79.65 GiB (not 80e9)
        ("L4", 23034 * 1048576),  # 24,152,899,584 B
        ("MI300X", 196592 * 1048576),  # 206,141,652,992 B
        # no published driver total: the nominal figure in GiB
        ("H100-PCIe", 80 * 1073741824),  # 85,899,345,920 B
        ("H200", 141 * 1073741824),  # 151,397,597,184 B
    ],
)
def test_gpu_memory_bytes_are_the_driver_total_else_the_nominal_gib(
    name: str, memory_bytes: int
) -> None:
    gpu = catalog().gpus.get(name)
    assert gpu.memory_bytes == memory_bytes
    assert gpu.memory_gib == pytest.approx(memory_bytes / 2**30, rel=1e-12)


def test_hbm_capacities_are_gib_so_the_driver_reports_more_than_the_decimal_figure() -> None:
    # the bug this guards against: 80 GB read as 80e9 bytes loses 5.5e9 bytes of KV cache
    h100 = catalog().gpus.get("H100-SXM")
    assert (h100.memory, h100.memory_unit) == (80, "GiB")
    assert h100.memory_bytes - 80e9 == 81559 * 2**20 - 80e9 == pytest.approx(5.52e9, rel=1e-3)
    assert h100.memory_gib == pytest.approx(79.647, abs=1e-3) and GIB == 2**30


GPU_HEADER = (
    "name,aliases,memory,memory_unit,device_memory_mib,mem_bw_gbps,bf16_tflops,link_gbps,"
    "max_gpus_per_node\n"
)


def write_gpus(tmp_path: Path, row: str) -> Path:
    path = tmp_path / "gpus.csv"
    path.write_text(GPU_HEADER + row + "\n", encoding="utf-8")
    return path


def test_a_gb_unit_row_is_read_as_decimal_bytes(tmp_path: Path) -> None:
    (gpu,) = load_gpus(write_gpus(tmp_path, "X,,24,GB,,300,100,32,8"))
    assert gpu.memory_bytes == 24e9
    assert gpu.device_memory_mib is None


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("X,,80,gb,,300,100,32,8", "memory_unit must be one of GiB, GB, got 'gb'"),
        ("X,,80,,,300,100,32,8", "memory_unit must be one of GiB, GB, got ''"),
        ("X,,80,TB,,300,100,32,8", "memory_unit must be one of GiB, GB"),
        # 81559 MiB = 85.5e9 bytes cannot fit in 80 GB (decimal): the unit must be GiB
        ("X,,80,GB,81559,300,100,32,8", "device_memory_mib = 81559 (79.65 GiB) exceeds memory"),
        ("X,,80,GiB,81921,300,100,32,8", "exceeds memory = 80 GiB"),
        ("X,,80,GiB,0,300,100,32,8", "device_memory_mib = 0 must be positive"),
        ("X,,80,GiB,lots,300,100,32,8", "device_memory_mib = 'lots' is not a number"),
        ("X,,,GiB,,300,100,32,8", "memory is required"),
    ],
)
def test_bad_memory_cells_are_catalog_errors_naming_row_and_column(
    tmp_path: Path, row: str, message: str
) -> None:
    with pytest.raises(CatalogError, match=re.escape(message)) as info:
        load_gpus(write_gpus(tmp_path, row))
    assert "gpus.csv: 'X'" in str(info.value)


def test_a_missing_memory_unit_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "gpus.csv"
    path.write_text("name,aliases,memory,mem_bw_gbps,link_gbps,max_gpus_per_node\nX,,80,1,1,1\n")
    with pytest.raises(CatalogError, match="missing column 'memory_unit'"):
        load_gpus(path)


def test_a_negative_scale_overhead_is_a_catalog_error(tmp_path: Path) -> None:
    text = (CATALOG_DIR / "precisions.csv").read_text(encoding="utf-8")
    path = tmp_path / "precisions.csv"
    path.write_text(text.replace('fp4,"nvfp4,w4a4-fp4",4,0.5,', "fp4,,4,-0.5,", 1))
    with pytest.raises(CatalogError, match=re.escape("'fp4': scale_bits_per_weight = -0.5")):
        load_precisions(path)


def test_an_fp32_model_on_the_cpu_row_keeps_four_byte_activations_cache_and_lm_head() -> None:
    from planner.latency.engines import deploy
    from planner.latency.model import LatencyModel
    from planner.latency.profile import Profile

    cat = catalog()
    cpu, tiny = cat.gpus.get("cpu"), cat.models.get("bench-llama-tiny")
    fp32 = deploy("torch", cpu, tiny, cat.precisions.get("fp32"))
    assert fp32.kv_cache == "fp32" and fp32.activation_bytes == 4.0
    # K and V, every layer, every KV head, four bytes each
    assert fp32.kv_bytes_per_token == 2 * tiny.layers * tiny.kv_heads * tiny.head_dim * 4
    assert fp32.weight_bytes_per_gpu == tiny.total_params * 4
    model = LatencyModel(fp32, Profile(name="t", engine="torch"))
    assert model.lm_bytes == tiny.hidden_size * tiny.vocab_size * 4
    # the LM head runs at the FP32 peak, the only one a CPU row states
    assert model.lm_flops == pytest.approx(0.2688e12 * model.profile.compute_eff)
    # a 16-bit model on the same GPU keeps 2-byte activations; a CPU has no 16-bit peak
    bf16 = deploy("vllm", cat.gpus.get("L4"), tiny, cat.precisions.get("bf16"))
    assert bf16.activation_bytes == 2.0 and bf16.kv_cache == "fp16"
    with pytest.raises(UnsupportedError, match="no BF16"):
        deploy("torch", cpu, tiny, cat.precisions.get("bf16"))
