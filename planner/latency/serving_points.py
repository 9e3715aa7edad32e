"""Serving measurements under load: one benchmark run at one load, as published.

Each :class:`ServingRun` says what ran (engine, GPU, model, precision, tensor parallelism,
engine settings), how the load was made (closed loop of N clients, or an open-loop rate),
which lengths were sent, and what was measured (milliseconds, tokens/s). They are read from the
two bundled files (``data/reference/serving_under_load.csv``, compiled from NVIDIA NIM,
SGLang and vLLM publications, and ``data/reference/vllm_h100_under_load.csv``, real vLLM stages
measured with inference-perf); ``planner.simulate.serving_fit`` replays them through the
simulator. Plain data: no store, no simulator.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.errors import InputFileError
from planner.paths import data_dir

MAX_FILE_BYTES = 8 * 1024 * 1024

# measured statistic -> column of serving_under_load.csv
NIM_METRICS = {
    "ttft_mean": "ttft_mean_ms",
    "ttft_p50": "ttft_p50_ms",
    "ttft_p95": "ttft_p95_ms",
    "tpot_mean": "tpot_mean_ms",
    "tpot_p95": "tpot_p95_ms",
    "itl_mean": "itl_mean_ms",
    "itl_p50": "itl_p50_ms",
    "e2e_mean": "e2e_mean_ms",
    "e2e_p50": "e2e_p50_ms",
    "e2e_p95": "e2e_p95_ms",
    "output_tokens_per_s": "output_tokens_per_s",
}
# the same for vllm_h100_under_load.csv (inference-perf's own TPOT/ITL count the stream's blank
# separator lines: itl_derived_generated_ms is the real per-token time, see its README)
INFERENCE_PERF_METRICS = {
    "ttft_mean": "ttft_mean_ms",
    "ttft_p50": "ttft_p50_ms",
    "ttft_p90": "ttft_p90_ms",
    "ttft_p99": "ttft_p99_ms",
    "tpot_mean": "itl_derived_generated_ms",
    "e2e_mean": "e2e_mean_ms",
    "e2e_p50": "e2e_p50_ms",
    "e2e_p90": "e2e_p90_ms",
    "e2e_p99": "e2e_p99_ms",
}
LOCK_STEP_CLIENTS = ("GenAI-Perf", "AIPerf")
ENGINES = {"NVIDIA NIM (TensorRT-LLM backend)": "trtllm", "SGLang": "sglang", "vLLM": "vllm"}
# published model ids -> the catalog's model of the same shape (Llama 3, 3.1 and 3.3 differ in
# context length and training, not in the layers the latency model prices)
MODELS = {
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3-70B-Instruct": "llama-3.1-70b",
    "meta-llama/Llama-3.3-70B-Instruct": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Llama-2-70b-hf": "llama-2-70b",
}


@dataclass(frozen=True)
class ServingRun:
    """One published run at one load, and what it measured."""

    dataset: str  # which data set: nim-genaiperf, nim-docs, sglang-readme, vllm-h100
    row: int  # the row of its file (1 = the first data row)
    source: str
    engine: str  # planner's engine name
    engine_version: str
    gpu: str  # catalog name
    model: str  # catalog name
    precision: str
    tp: int
    load_kind: str  # "concurrency" (closed loop, synchronized clients) or "rate" (Poisson)
    load: float  # clients, or requests/s
    input_tokens: float  # mean prompt tokens
    output_tokens: float  # mean output tokens
    measured: dict[str, float]  # statistic -> value (ms; tokens/s for output_tokens_per_s)
    duration_s: float = 0.0  # an open-loop run's length (0: as many requests as needed)
    prefix_hit_rate: float = 0.0  # share of prompt tokens served from the prefix cache
    settings: dict[str, Any] = field(default_factory=dict)  # engine settings the run stated
    excluded: str = ""  # why this run is not used (empty: used)
    # how closed-loop clients send: "waves" (lock-step: identical requests that return
    # together are sent again together, GenAI-Perf's and AIPerf's pattern), "synchronized"
    # (started together, then free-running) or "staggered"
    clients_start: str = "synchronized"
    # per-request lengths where the benchmark's data set is known (sent in this order, cycled);
    # empty: every request has the mean lengths above
    input_lengths: tuple[int, ...] = ()
    output_lengths: tuple[int, ...] = ()

    @property
    def configuration(self) -> str:
        """What a leave-one-configuration-out split holds out together: every load and length
        of one deployment (engine, GPU, model, precision, TP) in one data set."""
        return f"{self.dataset}:{self.engine}/{self.gpu}/{self.model}/{self.precision}/tp{self.tp}"


def _rows(path: Path) -> Iterator[dict[str, str]]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputFileError(path, f"cannot read ({exc.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputFileError(path, f"larger than {MAX_FILE_BYTES // 2**20} MiB")
    yield from csv.DictReader(io.StringIO(raw.decode("utf-8")))


def _float(row: dict[str, str], column: str) -> float:
    text = (row.get(column) or "").strip()
    try:
        return float(text) if text else math.nan
    except ValueError:
        return math.nan


def _measured(row: dict[str, str], columns: dict[str, str]) -> dict[str, float]:
    values = {name: _float(row, column) for name, column in columns.items()}
    return {name: v for name, v in values.items() if math.isfinite(v) and v > 0}


def _gpu(text: str) -> str:
    return "H100-SXM" if "H100" in text else "A100-80GB" if "A100" in text else text


def published_runs(path: Path | None = None) -> list[ServingRun]:
    """The runs of ``serving_under_load.csv`` (NIM GenAI-Perf sweeps, NIM 1.8 docs, the
    SGLang README's ShareGPT runs)."""
    path = path or data_dir() / "reference" / "serving_under_load.csv"
    runs = []
    for number, row in enumerate(_rows(path), start=1):
        source = row["source_id"]
        dataset = (
            "nim-genaiperf"
            if source.startswith("S1")
            else "nim-docs"
            if source.startswith("S2")
            else "sglang-readme"
        )
        measured = _measured(row, NIM_METRICS)
        excluded = ""
        engine = ENGINES[row["engine"]]
        if dataset == "sglang-readme":
            # ShareGPT lengths vary widely and only their means are known: E2E and throughput
            # of fixed-length replays would not compare; vLLM 0.6 streamed ten tokens at a time
            # (multi-step scheduling), so its ITL is not a per-token time
            keep = ("ttft_p50", "itl_p50") if engine == "sglang" else ("ttft_p50",)
            measured = {k: v for k, v in measured.items() if k in keep}
        if dataset == "nim-docs":
            measured["tpot_mean"] = measured.pop("itl_mean")
        runs.append(
            ServingRun(
                dataset=dataset,
                row=number,
                source=row["source_url"],
                engine=engine,
                engine_version=row["engine_version"],
                gpu=_gpu(row["gpu"]),
                model=MODELS[row["model_hf"]],
                precision=row["precision"],
                tp=int(row["tp"]),
                load_kind="concurrency" if row["load_kind"] == "concurrency" else "rate",
                load=float(row["load"]),
                input_tokens=float(row["input_tokens"]),
                output_tokens=float(row["output_tokens"]),
                measured=measured,
                duration_s=300.0 if row["load_kind"] != "concurrency" else 0.0,
                excluded=excluded,
                # identical fixed-length requests: GenAI-Perf's and AIPerf's clients stay in
                # lock-step (see the file's notes), so a concurrency-C run comes in waves of C
                clients_start="waves" if row["client"] in LOCK_STEP_CLIENTS else "synchronized",
            )
        )
    return runs


def vllm_h100_runs(path: Path | None = None) -> list[ServingRun]:
    """The load stages of real vLLM on one H100 node (``vllm_h100_under_load.csv``)."""
    path = path or data_dir() / "reference" / "vllm_h100_under_load.csv"
    runs = []
    for number, row in enumerate(_rows(path), start=1):
        prompt = _float(row, "prompt_len_mean")
        shared = _float(row, "system_prompt_len")
        groups = _float(row, "num_groups")
        per_group = _float(row, "num_prompts_per_group")
        # 100 distinct prompts sent round robin: after each prompt's first send, all of its
        # tokens but the last block are cached (vLLM reuses whole 16-token blocks)
        hit = max(0.0, 1.0 - 16.0 / prompt) if prompt > 0 else 0.0
        runs.append(
            ServingRun(
                dataset="vllm-h100",
                row=number,
                source=row["source"],
                engine="vllm",
                engine_version=row["vllm_version"],
                gpu="H100-SXM",
                model=MODELS[row["model"]],
                precision="fp16",
                tp=int(row["tp"]),
                load_kind="rate",
                load=_float(row, "stage_rate_rps"),
                input_tokens=prompt,
                # ignore_eos forces the configured length: (E2E - TTFT) / per-token time is 246
                # to 247 in every stage, while output_len_mean (a re-tokenized count) is lower
                output_tokens=_float(row, "output_len"),
                measured=_measured(row, INFERENCE_PERF_METRICS),
                duration_s=min(_float(row, "stage_duration_s"), 300.0),
                prefix_hit_rate=hit,
                settings={
                    "max_batched_tokens": int(_float(row, "max_num_batched_tokens")),
                    "max_seqs": int(_float(row, "max_num_seqs")),
                    "memory_utilization": _float(row, "gpu_memory_utilization"),
                    "shared_prefix_tokens": shared,
                    "prompt_groups": groups * per_group,
                },
                excluded=row.get("excluded_reason", "")
                if row.get("excluded", "").strip().lower() == "true"
                else "",
            )
        )
    return runs
