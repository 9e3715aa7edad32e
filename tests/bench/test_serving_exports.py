"""GenAI-Perf, AIPerf and inference-perf exports read as runs (real files, see
tests/fixtures/serving/README.md), bad inputs refused with the file and key named, and runs of
any tool turned into the serving runs calibration replays."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from planner.bench.importers import import_result
from planner.bench.results import BenchRun, Load, RunInfo
from planner.bench.serving_exports import load_model, serving_run, unreplayable
from planner.errors import InputFileError, UsageError
from planner.latency.catalog import load_catalog
from planner.latency.serving_points import vllm_h100_runs
from tests.conftest import ROOT

SERVING = ROOT / "tests" / "fixtures" / "serving"
GENAI_PERF = SERVING / "genai-perf_c100_profile_export_genai_perf.json"
AIPERF = SERVING / "aiperf_c100_profile_export_aiperf.json"
STAGES = SERVING / "inference-perf"
STAGE_0 = STAGES / "stage_0_lifecycle_metrics.json"
STAGE_1 = STAGES / "stage_1_lifecycle_metrics.json"
VLLM_CATALOG = (
    ROOT / "tests" / "fixtures" / "bench-results" / "vllm-bench-serve_catalog-metadata.json"
)


def _one(path: Path, **options: Any) -> BenchRun:
    runs = import_result(path, **options)
    assert len(runs) == 1
    return runs[0]


def _edited(tmp_path: Path, source: Path, edit: Any, name: str | None = None) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / (name or source.name)
    path.write_text(json.dumps(data))
    return path


# --- GenAI-Perf ----------------------------------------------------------------------------


def test_genai_perf_export_is_a_closed_loop_of_its_concurrency() -> None:
    run = _one(GENAI_PERF, needed_for=())
    info = run.info
    assert info.tool == "genai-perf" and "profile_export_genai_perf.json" in info.source_format
    assert info.load == Load("concurrency", 100.0)
    assert load_model(info.load) == "closed loop, 100 clients"
    assert info.model == "ensemble"  # the Triton ensemble's name: no catalog model
    assert run.ttft.mean == pytest.approx(184.63779366666665)
    assert run.ttft.p99 == pytest.approx(425.02943662)
    # GenAI-Perf's inter-token latency is per request: vLLM's TPOT
    assert run.tpot.mean == run.itl.mean == pytest.approx(2.1767344516666665)
    assert run.e2el.p90 == pytest.approx(5882.4496025)
    assert run.input_len == pytest.approx(200.85)
    assert run.output_len == pytest.approx(2565.855)
    assert run.output_throughput == pytest.approx(44190.56002502682)
    assert run.request_throughput == pytest.approx(17.222547659562533)
    assert run.completed == 0  # the export records no request count


def test_genai_perf_needs_the_deployment_from_options() -> None:
    with pytest.raises(UsageError, match="--gpu, --engine and --precision"):
        import_result(GENAI_PERF, model="llama-3.1-8b")
    run = _one(GENAI_PERF, engine="trtllm", model="llama-3.1-8b", gpu="H100-SXM", precision="fp16")
    replayed = serving_run(run, load_catalog())
    assert replayed.configuration == "serving:trtllm/H100-SXM/llama-3.1-8b/fp16/tp1"
    assert (replayed.load_kind, replayed.load) == ("concurrency", 100.0)
    assert replayed.input_tokens == pytest.approx(200.85)
    assert replayed.measured["tpot_mean"] == pytest.approx(2.1767344516666665)
    assert replayed.measured["e2e_p99"] == pytest.approx(5910.154859249999)
    assert replayed.measured["output_tokens_per_s"] == pytest.approx(44190.56002502682)


def test_genai_perf_request_rate_is_constant_and_nested_config_is_read(tmp_path: Path) -> None:
    def rate(data: dict[str, Any]) -> None:
        data["input_config"].update(concurrency=None, request_rate=12.5)

    run = _one(_edited(tmp_path, GENAI_PERF, rate), needed_for=())
    assert run.info.load == Load("qps", 12.5, arrival="constant")  # perf_analyzer's default
    assert load_model(run.info.load) == "constant-rate arrivals at 12.5 req/s"

    def nested(data: dict[str, Any]) -> None:
        data["input_config"] = {
            "model_names": ["meta-llama/Llama-3.1-8B-Instruct"],
            "perf_analyzer": {"stimulus": {"concurrency": 16}},
        }

    run = _one(_edited(tmp_path, GENAI_PERF, nested, "nested.json"), needed_for=())
    assert run.info.load == Load("concurrency", 16.0)
    assert run.info.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_genai_perf_nanosecond_statistics_become_ms(tmp_path: Path) -> None:
    def in_ns(data: dict[str, Any]) -> None:  # early GenAI-Perf: ns, numbers written as text
        block = data["time_to_first_token"]
        for key in ("avg", "p50", "p90", "p99", "std"):
            block[key] = str(block[key] * 1e6)
        block["unit"] = "ns"

    run = _one(_edited(tmp_path, GENAI_PERF, in_ns), needed_for=())
    assert run.ttft.mean == pytest.approx(184.63779366666665)
    assert run.ttft.p99 == pytest.approx(425.02943662)


# --- AIPerf --------------------------------------------------------------------------------


def test_aiperf_export_with_counts_totals_and_telemetry() -> None:
    run = _one(AIPERF, needed_for=())
    info = run.info
    assert info.tool == "aiperf" and info.load == Load("concurrency", 100.0)
    assert info.gpu == "NVIDIA RTX 6000 Ada Generation" and info.gpu_count == 1
    assert info.model == "openai/gpt-oss-20b"
    assert run.completed == 200 and run.duration == pytest.approx(15.196591969000002)
    assert run.input_len == pytest.approx(550.0)  # total_isl / request_count
    assert run.output_len == pytest.approx(96.85)  # output_sequence_length.avg
    assert run.output_throughput == pytest.approx(19370.0 / 15.196591969000002)
    assert run.ttft.p50 == pytest.approx(787.5439584999999) and run.ttft.p99 is None
    assert run.e2el.p99 == pytest.approx(9381.628943169999)


@pytest.mark.parametrize(
    ("loadgen", "expected", "words"),
    [
        (
            {"request_rate": 8, "request_rate_mode": "constant", "concurrency": 32},
            Load("qps", 8.0, arrival="constant", max_concurrency=32),
            "constant-rate arrivals at 8 req/s, at most 32 in flight",
        ),
        ({"request_rate": 4}, Load("qps", 4.0, arrival="poisson"), "Poisson arrivals at 4 req/s"),
        ({"concurrency": 1}, Load("concurrency", 1.0), "closed loop, 1 clients"),
    ],
)
def test_aiperf_load_models(
    tmp_path: Path, loadgen: dict[str, Any], expected: Load, words: str
) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["input_config"]["loadgen"] = loadgen

    run = _one(_edited(tmp_path, AIPERF, edit), needed_for=())
    assert run.info.load == expected and load_model(run.info.load) == words
    replayed = serving_run(
        _one(
            _edited(tmp_path, AIPERF, edit),
            engine="vllm",
            model="llama-3.1-8b",
            gpu="H100-SXM",
            precision="fp16",
        ),
        load_catalog(),
    )
    if expected.kind == "qps":
        assert replayed.load_kind == "rate" and replayed.settings["arrival"] == expected.arrival
        assert replayed.settings.get("max_concurrency") == expected.max_concurrency
        assert replayed.duration_s == pytest.approx(15.196591969000002)
    else:
        assert replayed.load_kind == "concurrency" and replayed.settings == {}


# --- inference-perf ------------------------------------------------------------------------


def test_inference_perf_stage_matches_the_bundled_row() -> None:
    """The stage read from its real files is the run the bundled CSV row describes."""
    run = _one(STAGE_0, gpu="H100-SXM", precision="fp16")
    info = run.info
    assert info.tool == "inference-perf" and info.benchmark == 0
    assert info.load == Load("qps", 5.0, arrival="constant")  # config.yaml's load.type
    assert (info.engine, info.model) == ("vllm", "meta-llama/Llama-2-7b-hf")
    assert run.completed == 3000 and run.failed == 0
    assert run.output_len == 247.0  # ignore_eos: the configured length, not the re-tokenized
    replayed = serving_run(run, load_catalog())
    bundled = vllm_h100_runs()[0]  # stage 0 of the same experiment
    assert replayed.configuration.split(":")[1] == bundled.configuration.split(":")[1]
    assert (replayed.load_kind, replayed.load) == (bundled.load_kind, bundled.load)
    assert replayed.input_tokens == pytest.approx(bundled.input_tokens)
    assert replayed.output_tokens == pytest.approx(bundled.output_tokens)
    assert replayed.prefix_hit_rate == pytest.approx(bundled.prefix_hit_rate)
    for metric in ("ttft_mean", "ttft_p99", "tpot_mean", "e2e_mean", "e2e_p99"):
        assert replayed.measured[metric] == pytest.approx(bundled.measured[metric], rel=1e-4)
    assert _one(STAGE_1, gpu="H100-SXM", precision="fp16").info.load == Load(
        "qps", 10.0, arrival="constant"
    )


def test_inference_perf_without_its_config(tmp_path: Path) -> None:
    alone = tmp_path / STAGE_0.name
    shutil.copy(STAGE_0, alone)
    run = _one(alone, needed_for=())
    assert run.info.load == Load("qps", 5.0) and run.info.engine is None
    assert run.output_len == pytest.approx(193.71533333333332)  # the measured mean
    assert run.info.prefix_hit_rate is None
    with pytest.raises(UsageError, match="--engine"):
        import_result(alone, model="llama-2-7b", gpu="H100-SXM", precision="fp16")


def test_inference_perf_bad_config(tmp_path: Path) -> None:
    shutil.copy(STAGE_0, tmp_path / STAGE_0.name)
    (tmp_path / "config.yaml").write_text("load: [unclosed\n")
    with pytest.raises(InputFileError, match=r"config\.yaml: not readable YAML"):
        import_result(tmp_path / STAGE_0.name, needed_for=())


# --- bad input -----------------------------------------------------------------------------


def _set(path: list[str], value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _drop(path: list[str]) -> Any:
    def edit(data: dict[str, Any]) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return edit


@pytest.mark.parametrize(
    ("source", "edit", "message"),
    [
        (GENAI_PERF, _set(["time_to_first_token", "avg"], -5.0), "time_to_first_token.avg"),
        (GENAI_PERF, _set(["time_to_first_token", "p99"], "fast"), "time_to_first_token.p99"),
        (GENAI_PERF, _set(["request_latency", "unit"], "hours"), "request_latency.unit"),
        (GENAI_PERF, _drop(["time_to_first_token", "avg"]), "time_to_first_token.avg: missing"),
        (GENAI_PERF, _drop(["input_config"]), "input_config: missing"),
        (GENAI_PERF, _set(["input_config", "concurrency"], None), "neither a concurrency"),
        (GENAI_PERF, _set(["input_config", "concurrency"], 0), "input_config.concurrency"),
        (GENAI_PERF, _set(["request_latency", "p99"], 1e12), "--allow-extreme"),
        (AIPERF, _set(["input_config", "loadgen"], {"request_count": 5}), "neither a concurrency"),
        (AIPERF, _set(["request_count", "avg"], 2.5), "request_count.avg"),
        (STAGE_0, _set(["load_summary", "requested_rate"], 0), "load_summary.requested_rate"),
        (
            STAGE_0,
            _drop(["successes", "latency", "time_to_first_token"]),
            "successes.latency.time_to_first_token: missing",
        ),
        (
            STAGE_0,
            _set(["successes", "latency", "request_latency", "p99"], -1.0),
            "successes.latency.request_latency.p99",
        ),
    ],
)
def test_bad_exports_name_file_and_key(
    tmp_path: Path, source: Path, edit: Any, message: str
) -> None:
    path = _edited(tmp_path, source, edit)
    with pytest.raises(InputFileError) as caught:
        import_result(path, needed_for=())
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_nan_latency_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text(GENAI_PERF.read_text().replace("184.63779366666665", "NaN", 1))
    with pytest.raises(InputFileError, match=r"time_to_first_token\.avg: expected a latency"):
        import_result(path, needed_for=())


def test_export_over_the_size_limit_is_refused_before_reading() -> None:
    with pytest.raises(InputFileError, match="--max-bytes"):
        import_result(AIPERF, needed_for=(), max_bytes=1024)


# --- runs of any tool as serving runs ------------------------------------------------------


def test_vllm_bench_serve_run_replays_as_poisson_rate() -> None:
    run = _one(VLLM_CATALOG)
    replayed = serving_run(run, load_catalog())
    assert replayed.configuration == "serving:vllm/H100-SXM/llama-3.1-8b/fp8/tp2"
    assert (replayed.load_kind, replayed.load) == ("rate", 2.5)
    assert replayed.settings == {"arrival": "poisson"}
    assert {"ttft_mean", "tpot_mean", "e2e_mean", "output_tokens_per_s"} <= set(replayed.measured)


def test_a_burst_at_maximum_rate_cannot_be_replayed() -> None:
    run = _one(VLLM_CATALOG)
    burst = BenchRun(
        **{**{f: getattr(run, f) for f in run.__dataclass_fields__ if f != "info"}},
        info=RunInfo(**{**run.info.__dict__, "load": Load("max")}),
    )
    assert "maximum rate" in (unreplayable(burst) or "")
    with pytest.raises(UsageError, match="cannot be replayed"):
        serving_run(burst, load_catalog())


def test_prefix_hit_rate_survives_the_stored_form() -> None:
    run = _one(STAGE_0, gpu="H100-SXM", precision="fp16")
    again = BenchRun.from_dict(run.to_dict())
    assert again.info.prefix_hit_rate == pytest.approx(run.info.prefix_hit_rate or math.nan)
    assert "prefix_hit_rate" not in _one(VLLM_CATALOG).to_dict()["planner"]
