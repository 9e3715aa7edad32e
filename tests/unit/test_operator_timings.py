"""The bundled operator timings (Vidur's A100/H100 profiles) and the latency model's errors on
them: the file reads and carries its source and licence, every point is priced, and the error
summary shows the per-operator errors the issue reports for today's default profile.
"""

from __future__ import annotations

import gzip
import math
import re
from pathlib import Path

import pytest

from planner.latency.catalog import Catalog, load_catalog
from planner.latency.model import Deployment, LatencyModel
from planner.latency.operators import (
    ATTENTION_OPERATORS,
    BUCKETS,
    FAMILIES,
    LINEAR_OPERATORS,
    OPERATORS,
    ErrorRow,
    OperatorDataError,
    OperatorPoint,
    markdown_table,
    operator_errors,
    predict_ms,
    read_operator_points,
)
from planner.latency.profile import Profile
from tests.conftest import profiles_2026_12_01

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"
BUNDLE = REFERENCE / "operator_timings.csv"
LICENCE = REFERENCE / "LICENSE_MIT_vidur.txt"
HEADER = (
    "source_repo,source_path,commit,gpu,model,tp,operator,tokens,batch,context,prefill_len,"
    "measured_ms,dtype,backend,retrieved"
)


@pytest.fixture(scope="module")
def points() -> list[OperatorPoint]:
    return read_operator_points()


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def default_profile() -> Profile:
    # the offline trtllm-default of 2026-12-01, which these stated operator errors describe;
    # the profile refitted under load (issue 37) trades some of them away (docs/accuracy.md)
    return next(p for p in profiles_2026_12_01() if p.name == "trtllm-default")


@pytest.fixture(scope="module")
def summary(
    points: list[OperatorPoint], default_profile: Profile, catalog: Catalog
) -> dict[tuple[str, str, str], ErrorRow]:
    return {
        (r.gpu, r.family, r.bucket): r for r in operator_errors(points, default_profile, catalog)
    }


# --- the bundled file ------------------------------------------------------------------------


def test_the_bundle_reads_and_covers_both_gpus_and_every_operator(
    points: list[OperatorPoint],
) -> None:
    assert BUNDLE.read_text().splitlines()[0] == HEADER
    assert len(points) >= 400
    assert {p.gpu for p in points} == {"A100-80GB", "H100-SXM"}
    assert {p.operator for p in points} == set(OPERATORS)
    assert BUNDLE.stat().st_size < 200_000  # a reference subset, not the whole profile


def test_every_value_is_finite_and_positive(points: list[OperatorPoint]) -> None:
    for p in points:
        assert math.isfinite(p.measured_ms) and p.measured_ms > 0, p
        assert p.tokens >= 1 and p.tp >= 1, p
        if p.operator in ATTENTION_OPERATORS:
            assert p.batch >= 1, p
        if p.operator == "attn_decode":
            assert p.context >= 1 and p.tokens == p.batch, p
        if p.operator == "attn_prefill":
            assert p.tokens == p.batch * p.prefill_len, p


def test_every_gpu_model_and_dtype_is_in_the_catalog(
    points: list[OperatorPoint], catalog: Catalog
) -> None:
    names = {(p.gpu, p.model, p.dtype) for p in points}
    for gpu, model, dtype in names:
        assert catalog.gpus.get(gpu).name == gpu
        assert catalog.models.get(model).name == model
        assert catalog.precisions.get(dtype).weight_bits == 16


def test_every_row_carries_its_pinned_source(points: list[OperatorPoint]) -> None:
    for p in points:
        assert p.source_repo in ("microsoft/vidur", "sw5sh/cs378-assignment3"), p
        assert p.source_path.startswith("data/profiling/compute/"), p
        assert re.fullmatch(r"[0-9a-f]{40}", p.commit), p
        assert p.dtype == "fp16", p
    linear = {p.source_repo for p in points if p.operator in LINEAR_OPERATORS}
    assert linear == {"microsoft/vidur"}


def test_the_licence_and_the_readme_section_exist() -> None:
    text = LICENCE.read_text()
    assert text.startswith("MIT License")
    assert "Copyright (c) Microsoft Corporation." in text
    assert "Permission is hereby granted, free of charge" in text
    readme = (REFERENCE / "README.md").read_text()
    section = readme[readme.index("## Operator timings") :]
    assert "`operator_timings.csv`" in section
    assert "`LICENSE_MIT_vidur.txt`" in section
    assert "microsoft/vidur" in section


# --- predictions -------------------------------------------------------------------------------


def test_every_prediction_is_finite_and_positive(
    points: list[OperatorPoint], default_profile: Profile, catalog: Catalog
) -> None:
    for p in points:
        ms = predict_ms(p, default_profile, catalog)
        assert math.isfinite(ms) and ms > 0, p


def test_the_linear_shares_add_up_to_the_model_groups(
    default_profile: Profile, catalog: Catalog
) -> None:
    def point(operator: str) -> OperatorPoint:
        return OperatorPoint("H100-SXM", "llama-3.1-8b", 2, operator, 300, 0, 0, 0, 1.0)

    model = catalog.models.get("llama-3.1-8b")
    deployment = Deployment(
        catalog.gpus.get("H100-SXM"), model, catalog.precisions.get("fp16"), tp=2
    )
    cost = LatencyModel(deployment, default_profile).cost(300, 0, 0, 0)
    per_layer = {op: predict_ms(point(op), default_profile, catalog) for op in LINEAR_OPERATORS}
    projections = per_layer["linear_qkv"] + per_layer["linear_o"]
    mlp = per_layer["linear_mlp_up_gate"] + per_layer["linear_mlp_down"]
    assert projections * model.layers == pytest.approx(float(cost.projections) * 1e3)
    assert mlp * model.layers == pytest.approx(float(cost.mlp) * 1e3)
    # GQA: Q+K+V have 1.5x the parameters of O in Llama-3.1-8B (32 query heads, 8 KV heads)
    assert per_layer["linear_qkv"] / per_layer["linear_o"] == pytest.approx(1.5)
    assert per_layer["linear_mlp_up_gate"] == pytest.approx(2 * per_layer["linear_mlp_down"])


def test_attention_prefill_and_decode_are_priced_as_the_model_prices_them(
    default_profile: Profile, catalog: Catalog
) -> None:
    model = catalog.models.get("llama-2-7b")
    deployment = Deployment(
        catalog.gpus.get("A100-80GB"), model, catalog.precisions.get("fp16"), tp=1
    )
    latency = LatencyModel(deployment, default_profile)
    prefill = OperatorPoint("A100-80GB", "llama-2-7b", 1, "attn_prefill", 2048, 1, 0, 2048, 1.0)
    expected = float(latency.cost(2048, 2048 * 2049 / 2, 0, 0).attention) / model.layers * 1e3
    assert predict_ms(prefill, default_profile, catalog) == pytest.approx(expected)
    decode = OperatorPoint("A100-80GB", "llama-2-7b", 1, "attn_decode", 16, 16, 1024, 0, 1.0)
    expected = float(latency.cost(16, 16 * 1025, 16 * 1024, 0).attention) / model.layers * 1e3
    assert predict_ms(decode, default_profile, catalog) == pytest.approx(expected)
    # a longer context costs more, as it must
    longer = OperatorPoint("A100-80GB", "llama-2-7b", 1, "attn_decode", 16, 16, 4032, 0, 1.0)
    assert predict_ms(longer, default_profile, catalog) > predict_ms(
        decode, default_profile, catalog
    )


# --- today's errors (the findings) ---------------------------------------------------
#
# Signed median error, in percent, of (predicted - measured) / measured under the bundled
# trtllm-default profile. Today only the SIGN is asserted: (lo, hi) = (0, None) means "the model
# predicts too slow", (None, 0) "too fast". Once the model gains a token-dependent GEMM efficiency
# and separate attention efficiencies, replace these with tight bounds, e.g. (-15, 15).
# The median absolute errors (%) docs/latency-model.md states for the bundled trtllm-default
# profile. Before issue 12 (one compute efficiency, attention on the GEMM roofline) they were
# -29% / +3% / +29% for A100 GEMMs by token bucket and -98% / -76% / -53% for prefill attention.
STATED: dict[tuple[str, str, str], float] = {
    ("A100-80GB", "linear", "<=128"): 10.0,
    ("A100-80GB", "linear", "129-511"): 16.0,
    ("A100-80GB", "linear", ">=512"): 8.0,
    ("H100-SXM", "linear", "<=128"): 14.0,
    ("H100-SXM", "linear", "129-511"): 16.0,
    ("H100-SXM", "linear", ">=512"): 10.0,
    # two kernels (FlashAttention, FlashInfer) 3x apart: one efficiency sits between them
    ("A100-80GB", "attn_prefill", "<=128"): 40.0,
    ("A100-80GB", "attn_prefill", "129-511"): 10.0,
    ("A100-80GB", "attn_prefill", ">=512"): 45.0,
    ("A100-80GB", "attn_decode", "<=128"): 10.0,
}


@pytest.mark.parametrize("key", sorted(STATED), ids=lambda k: "/".join(k))
def test_the_bundled_profile_meets_the_stated_operator_errors(
    key: tuple[str, str, str], summary: dict[tuple[str, str, str], ErrorRow]
) -> None:
    row = summary[key]
    assert row.points >= 4
    assert row.median_abs_pct <= STATED[key], row
    assert row.median_abs_pct >= abs(row.signed_median_pct) - 1e-9


def test_the_summary_has_one_row_per_group_in_a_stable_order(
    points: list[OperatorPoint], default_profile: Profile, catalog: Catalog
) -> None:
    rows = operator_errors(points, default_profile, catalog)
    keys = [(r.gpu, r.family, r.bucket) for r in rows]
    assert len(keys) == len(set(keys))
    assert sum(r.points for r in rows) == len(points)
    assert keys == sorted(keys, key=lambda k: (k[0], FAMILIES.index(k[1]), BUCKETS.index(k[2])))
    table = markdown_table(rows)
    assert table.splitlines()[0].startswith("| GPU | family | tokens |")
    assert len(table.splitlines()) == len(rows) + 2


def test_a_better_profile_changes_the_errors(
    points: list[OperatorPoint], default_profile: Profile, catalog: Catalog
) -> None:
    """The summary really depends on the profile: a higher GEMM efficiency shrinks the
    over-prediction of large GEMMs."""
    faster = default_profile.with_params(compute_eff=0.75)
    before = {
        (r.gpu, r.family, r.bucket): r for r in operator_errors(points, default_profile, catalog)
    }
    after = {(r.gpu, r.family, r.bucket): r for r in operator_errors(points, faster, catalog)}
    key = ("A100-80GB", "linear", ">=512")
    assert after[key].signed_median_pct < before[key].signed_median_pct


# --- hostile files -----------------------------------------------------------------------------

GOOD_ROW = "x,y,0,A100-80GB,llama-2-7b,1,linear_qkv,512,,,,0.234,fp16,,2026-12-01"


def write(path: Path, *rows: str) -> Path:
    path.write_text("\n".join((HEADER, *rows)) + "\n")
    return path


def test_a_gzipped_copy_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "timings.csv.gz"
    packed.write_bytes(gzip.compress(BUNDLE.read_bytes()))
    assert read_operator_points(packed) == read_operator_points(BUNDLE)


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (GOOD_ROW.replace("0.234", "-1"), "row 1, column measured_ms"),
        (GOOD_ROW.replace("0.234", "nan"), "row 1, column measured_ms"),
        (GOOD_ROW.replace("linear_qkv", "softmax"), "row 1, column operator"),
        (GOOD_ROW.replace(",1,linear", ",0,linear"), "row 1, column tp"),
        (GOOD_ROW.replace(",512,", ",5.5,"), "row 1, column tokens"),
        (GOOD_ROW.replace("A100-80GB", ""), "row 1, column gpu"),
        ("x,y,0,A100-80GB,llama-2-7b,1,attn_decode,4,4,0,,0.1,fp16,,", "row 1, column context"),
        ("x,y,0,A100-80GB,llama-2-7b,1,attn_prefill,64,2,0,64,0.1,fp16,,", "column tokens"),
    ],
)
def test_a_bad_cell_is_named(tmp_path: Path, row: str, needle: str) -> None:
    path = write(tmp_path / "bad.csv", GOOD_ROW, row)
    with pytest.raises(OperatorDataError, match=needle.replace("row 1", "row 2")):
        read_operator_points(path)


def test_missing_files_columns_and_rows_are_named(tmp_path: Path) -> None:
    with pytest.raises(OperatorDataError, match="not found"):
        read_operator_points(tmp_path / "absent.csv")
    (tmp_path / "cols.csv").write_text("gpu,model\nA100-80GB,llama-2-7b\n")
    with pytest.raises(OperatorDataError, match="missing column 'tp'"):
        read_operator_points(tmp_path / "cols.csv")
    with pytest.raises(OperatorDataError, match="no data rows"):
        read_operator_points(write(tmp_path / "empty.csv"))
    (tmp_path / "binary.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(OperatorDataError, match="not a readable"):
        read_operator_points(tmp_path / "binary.csv.gz")
    assert len(read_operator_points(write(tmp_path / "one.csv", GOOD_ROW))) == 1
