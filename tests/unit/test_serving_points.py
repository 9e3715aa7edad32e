"""The bundled serving measurements under load, as planner reads them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from planner.errors import InputFileError
from planner.latency.catalog import load_catalog
from planner.latency.serving_data import bundled_runs
from planner.latency.serving_points import published_runs, vllm_h100_runs


def test_every_row_is_read_and_named_in_the_catalog() -> None:
    runs = bundled_runs()
    assert len(runs) == 803 + 12 + 24
    catalog = load_catalog()
    for run in runs:
        catalog.models.get(run.model)
        catalog.gpus.get(run.gpu)
        catalog.precisions.get(run.precision)
        assert run.source.startswith(("https://", "inference-sim/"))
    assert Counter(r.dataset for r in runs) == {
        "nim-genaiperf": 787,
        "nim-docs": 8,
        "sglang-readme": 8,
        "vllm-h100": 12,
        "mlperf-llama2-70b": 24,
    }


def test_genai_perf_runs_come_in_waves_and_measure_what_they_state() -> None:
    nim = [r for r in published_runs() if r.dataset == "nim-genaiperf"]
    assert {r.clients_start for r in nim} == {"waves"}
    assert {r.load_kind for r in nim} == {"concurrency"}
    assert len({r.configuration for r in nim}) == 12
    first = nim[0]  # row 1: 8B on 2 x A100, 200/1000 tokens, 5 clients
    assert (first.model, first.gpu, first.tp, first.load) == ("llama-3.1-8b", "A100-80GB", 2, 5)
    assert first.measured["ttft_mean"] == pytest.approx(40.17)
    assert first.measured["tpot_mean"] == pytest.approx(8.72)


def test_vllm_stages_use_the_forced_output_length_and_cached_prompts() -> None:
    runs = vllm_h100_runs()
    assert len(runs) == 12
    assert sum(bool(r.excluded) for r in runs) == 2
    for run in (r for r in runs if not r.excluded):
        assert run.output_tokens in (247, 248, 251)  # ignore_eos: the configured length
        assert 0.95 < run.prefix_hit_rate < 1
        assert run.settings["max_seqs"] == 128
        assert "tpot_mean" in run.measured and "ttft_p99" in run.measured


def test_the_sglang_readme_keeps_only_comparable_statistics() -> None:
    runs = [r for r in published_runs() if r.dataset == "sglang-readme"]
    for run in runs:
        allowed = {"ttft_p50", "itl_p50"} if run.engine == "sglang" else {"ttft_p50"}
        assert set(run.measured) <= allowed and run.measured


def test_a_file_too_large_is_refused_with_its_name(tmp_path: Path) -> None:
    big = tmp_path / "huge.csv"
    big.write_bytes(b"x" * (8 * 1024 * 1024 + 1))
    with pytest.raises(InputFileError, match="huge.csv"):
        published_runs(big)
