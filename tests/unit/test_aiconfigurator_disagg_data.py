"""Self-check of ``data/reference/aiconfigurator_disagg.csv``: AIConfigurator's aggregated and
disaggregated choices on 8 GPUs (made by ``benchmarks/aiconfigurator_disagg.py`` in AIConfigurator's
own environment; read here without it).

The file must cover the cases issue 33 asks for (a ~70B and an 8B-class dense model and a MoE, on
8 x H100 or H200, ISL/OSL 4000/500 and 1000/1000), give each case one agg and one disagg row with one
of them chosen, keep every configuration within the GPUs and the targets, hold consistent positive
figures, and say where each row came from; the README's table must be the CSV as it stands.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import re
from collections import defaultdict
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "data" / "reference"
DATA = REFERENCE / "aiconfigurator_disagg.csv"
README = REFERENCE / "README.md"
FIGURES = (
    "concurrency",
    "request_rate",
    "tokens_s",
    "tokens_s_gpu",
    "tokens_s_user",
    "ttft_ms",
    "tpot_ms",
    "request_latency_ms",
)


def _f(row: dict[str, str], column: str) -> float:
    return float(row[column])


def _i(row: dict[str, str], column: str) -> int:
    return int(row[column])


def _dim(row: dict[str, str], column: str) -> int:
    """A parallelism degree, 1 where the row's mode has none."""
    return int(row[column]) if row[column] else 1


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "aiconfigurator_disagg", ROOT / "benchmarks" / "aiconfigurator_disagg.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def search(rows: list[dict[str, str]]) -> dict[str, dict[str, dict[str, str]]]:
    """Search rows by case and mode (each case and mode once)."""
    out: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for r in rows:
        if r["kind"] == "search":
            assert r["mode"] not in out[r["case_id"]], f"{r['case_id']}: {r['mode']} twice"
            out[r["case_id"]][r["mode"]] = r
    return out


def test_columns_are_the_scripts(rows: list[dict[str, str]], script: ModuleType) -> None:
    with DATA.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert header == script.COLUMNS
    assert {r["kind"] for r in rows} == {"search", "estimate"}
    assert {r["mode"] for r in rows} == {"agg", "disagg"}


def test_cases_cover_the_issue(search: dict[str, dict[str, dict[str, str]]]) -> None:
    cases = [next(iter(modes.values())) for modes in search.values()]
    models = {r["model"] for r in cases}
    assert {"meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-8B"} <= models
    eps = ("moe_ep", "prefill_moe_ep", "decode_moe_ep")
    moe = {
        r["model"]
        for modes in search.values()
        for r in modes.values()
        if max(_dim(r, c) for c in eps) > 1
    }
    assert moe, "at least one MoE case, run with expert parallelism"
    for model in models:
        shapes = {(_i(r, "isl"), _i(r, "osl")) for r in cases if r["model"] == model}
        assert {(4000, 500), (1000, 1000)} <= shapes, model
    assert {r["system"] for r in cases} <= {"h100_sxm", "h200_sxm"}
    assert {_i(r, "total_gpus") for r in cases} == {8}


def test_every_case_has_agg_and_disagg_and_one_choice(
    search: dict[str, dict[str, dict[str, str]]],
) -> None:
    for case, modes in search.items():
        assert set(modes) == {"agg", "disagg"}, case
        chosen = [m for m, r in modes.items() if r["chosen"] == "True"]
        assert len(chosen) == 1, f"{case}: chosen {chosen}"
        assert all(r["chosen"] in ("True", "False") for r in modes.values()), case
        win, lose = modes[chosen[0]], modes["agg" if chosen[0] == "disagg" else "disagg"]
        # It picks the most tokens/s per GPU, and says by how much.
        assert _f(win, "tokens_s_gpu") >= _f(lose, "tokens_s_gpu"), case
        ratio = _f(win, "tokens_s_gpu") / _f(lose, "tokens_s_gpu")
        assert _f(win, "chosen_by") == pytest.approx(ratio, abs=2e-3), case
        assert lose["chosen_by"] == "", case
        same = ("model", "system", "isl", "osl", "search_wall_s", "command", "backend_version")
        assert all(win[c] == lose[c] for c in same), case


def test_configurations_fit_the_gpus(rows: list[dict[str, str]]) -> None:
    for r in rows:
        where = f"{r['case_id']} {r['kind']} {r['mode']}"
        gpr = _i(r, "gpus_per_replica")
        assert _i(r, "gpus_used") == _i(r, "replicas") * gpr <= _i(r, "total_gpus"), where
        assert _i(r, "replicas") >= 1, where
        # As many replicas as fit: another one would exceed the GPUs.
        assert (_i(r, "replicas") + 1) * gpr > _i(r, "total_gpus"), where
        if r["mode"] == "agg":
            assert gpr == _i(r, "tp") * _i(r, "pp") * _i(r, "dp"), where
            if _i(r, "moe_tp") * _i(r, "moe_ep") > 1:
                # An MoE's expert layers use the same GPUs as its attention (ETP x EP x PP).
                assert gpr == _i(r, "moe_tp") * _i(r, "moe_ep") * _i(r, "pp"), where
            assert _i(r, "batch") >= 1 and _i(r, "ctx_tokens") >= 1, where
            assert r["prefill_workers_per_replica"] == r["decode_workers_per_replica"] == ""
        else:
            p, d = _i(r, "prefill_workers_per_replica"), _i(r, "decode_workers_per_replica")
            prefill = _i(r, "prefill_tp") * _i(r, "prefill_dp")
            decode = _i(r, "decode_tp") * _i(r, "decode_dp")
            assert gpr == p * prefill + d * decode, where
            assert min(p, d, _i(r, "prefill_batch"), _i(r, "decode_batch")) >= 1, where
            x, y = (int(v) for v in r["pd_ratio"].split(":"))
            assert x * d == y * p and math.gcd(x, y) == 1, where
            assert r["tp"] == r["batch"] == "", where


def test_figures_are_positive_and_consistent(rows: list[dict[str, str]]) -> None:
    for r in rows:
        where = f"{r['case_id']} {r['kind']} {r['mode']}"
        for c in FIGURES:
            assert math.isfinite(_f(r, c)) and _f(r, c) > 0, f"{where}: {c}"
        # Per-user speed is the inverse of TPOT; the cluster's tokens/s over its 8 GPUs.
        assert _f(r, "tokens_s_user") == pytest.approx(1000 / _f(r, "tpot_ms"), rel=2e-3), where
        per_gpu = _f(r, "tokens_s") / _i(r, "total_gpus")
        assert _f(r, "tokens_s_gpu") == pytest.approx(per_gpu, rel=1e-3), where
        # Output tokens are requests x OSL (its agg counts OSL - 1 per request).
        assert _f(r, "tokens_s") == pytest.approx(_f(r, "request_rate") * _i(r, "osl"), rel=3e-3)
        # A request's latency is its first token and OSL - 1 more at TPOT.
        latency = _f(r, "ttft_ms") + _f(r, "tpot_ms") * (_i(r, "osl") - 1)
        assert _f(r, "request_latency_ms") == pytest.approx(latency, rel=1e-3), where
        if r["kind"] == "search":
            assert _f(r, "tpot_ms") <= _f(r, "tpot_target_ms"), where
            assert _f(r, "ttft_ms") <= _f(r, "ttft_target_ms"), where
            assert _f(r, "search_wall_s") >= _f(r, "search_reported_s") > 0, where


def test_rows_say_where_they_come_from(rows: list[dict[str, str]], script: ModuleType) -> None:
    for r in rows:
        where = f"{r['case_id']} {r['kind']} {r['mode']}"
        assert r["aiconfigurator_version"] == script.AIC_VERSION, where
        assert r["backend"] == "trtllm" and re.fullmatch(r"\d+\.\d+\.\d+\w*", r["backend_version"])
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["predicted_on"]), where
        assert r["case_id"] == script.case_id(r["model"], r["system"], _i(r, "isl"), _i(r, "osl"))
        assert all(r[c] for c in ("gemm_quant", "kv_quant", "notes")), where
        assert (_f(r, "ttft_target_ms"), _f(r, "tpot_target_ms")) == (2000.0, 30.0), where
        if r["kind"] == "search":
            cmd = r["command"]
            assert cmd.startswith("aiconfigurator cli default "), where
            for flag, column in (("--model-path", "model"), ("--system", "system")):
                assert f"{flag} {r[column]} " in cmd, where
            for flag, column in (
                ("--isl", "isl"),
                ("--osl", "osl"),
                ("--total-gpus", "total_gpus"),
            ):
                assert f"{flag} {r[column]} " in cmd, where
        else:
            assert r["command"].startswith(f"cli_estimate(mode='{r['mode']}'"), where


def test_estimates_are_the_fixed_configurations(
    rows: list[dict[str, str]], search: dict[str, dict[str, dict[str, str]]]
) -> None:
    est = [r for r in rows if r["kind"] == "estimate"]
    agg = [r for r in est if r["mode"] == "agg"]
    disagg = sorted((r for r in est if r["mode"] == "disagg"), key=lambda r: _i(r, "decode_batch"))
    assert len(agg) == 1 and len(disagg) >= 2
    assert {(r["model"], r["system"], r["isl"], r["osl"]) for r in est} == {
        ("meta-llama/Meta-Llama-3.1-70B", "h200_sxm", "4000", "500")
    }
    a = agg[0]
    assert (_i(a, "replicas"), _i(a, "tp"), a["gemm_quant"]) == (2, 4, "bfloat16")
    # Where its search chose the same 2 x TP4 at that batch, the estimate is the same prediction.
    s = search[a["case_id"]]["agg"]
    if (s["tp"], s["batch"]) == (a["tp"], a["batch"]):
        for c in ("ttft_ms", "tpot_ms", "tokens_s_gpu"):
            assert _f(a, c) == pytest.approx(_f(s, c), rel=1e-4), c
    for r in disagg:
        layout = (
            r["prefill_workers_per_replica"],
            r["prefill_tp"],
            r["decode_workers_per_replica"],
            r["decode_tp"],
            r["replicas"],
        )
        assert layout == ("1", "4", "1", "4", "1")
    # A larger decode batch: slower tokens, and the same prefill (TTFT has no decode in it).
    tpots = [_f(r, "tpot_ms") for r in disagg]
    assert tpots == sorted(tpots) and len(set(tpots)) == len(tpots)
    assert len({r["ttft_ms"] for r in disagg}) == 1
    largest = [r for r in disagg if "largest decode batch" in r["notes"]]
    assert len(largest) == 1 and _f(largest[0], "tpot_ms") <= 30.0
    above = [r for r in disagg if _i(r, "decode_batch") > _i(largest[0], "decode_batch")]
    assert all(_f(r, "tpot_ms") > 30.0 for r in above)


def test_readme_table_is_the_csv(rows: list[dict[str, str]], script: ModuleType) -> None:
    doc = README.read_text(encoding="utf-8")
    assert script.BEGIN in doc and script.END in doc
    table = doc.split(script.BEGIN, 1)[1].split(script.END, 1)[0].strip()
    assert table == script.markdown(rows)
    assert len(table.splitlines()) == 2 + sum(r["kind"] == "search" for r in rows)
