"""Serving benchmarks' runs as the simulator replays them, and the export formats read for it.

The readers live in :mod:`planner.bench.importers` beside guidellm's and vLLM's (its
:func:`~planner.bench.importers.import_result` tells formats apart by their content, never
their name); the export formats they read:

- GenAI-Perf's ``profile_export_genai_perf.json`` and AIPerf's ``profile_export_aiperf.json``:
  one run, its statistics at the top level, one object per metric (``time_to_first_token``,
  ``inter_token_latency``, ``request_latency`` with ``avg``, ``p50``, ``p90``, ``p99``, ``std``
  and a ``unit``; ``output_token_throughput``, ``request_throughput`` with ``avg``), the mean
  lengths under ``input_sequence_length`` / ``output_sequence_length``, and the run's settings
  under ``input_config``: GenAI-Perf's flat arguments (``concurrency``, ``request_rate``,
  ``synthetic_input_tokens_mean``, ``output_tokens_mean``, ``model``) or its later nested
  configuration (``perf_analyzer.stimulus``), AIPerf's ``loadgen`` (``concurrency``,
  ``request_rate``, ``request_rate_mode`` / ``arrival_pattern``) and ``endpoint.model_names``.
  Their inter-token latency is per request, (E2E - TTFT) / (output tokens - 1): vLLM's TPOT.
  A request rate is perf_analyzer's constant interval in GenAI-Perf and Poisson in AIPerf
  unless its mode says otherwise; a concurrency is a closed loop of that many clients.
- inference-perf's ``stage_N_lifecycle_metrics.json`` (latencies in seconds; the stage's
  ``load_summary.requested_rate``), with the ``config.yaml`` inference-perf writes beside it
  where there is one (the model, the server type, the load type, the data set and
  ``ignore_eos``). inference-perf's own per-token times count the stream's blank separator
  lines and its output lengths are re-tokenized counts, so TPOT here is (E2E - TTFT) /
  (output tokens - 1) from the means, and with ``ignore_eos`` the configured output length is
  the output length.

Every number is checked (finite, not negative, within a plausible range; latencies converted
to ms); a file that is not what it claims raises an :class:`InputFileError` naming the file and
the JSON key path. :func:`serving_run` turns a :class:`BenchRun` of any tool (planner's own
``bench run`` results included) into the :class:`ServingRun` that ``planner calibrate
--serving`` replays through the simulator: the deployment in the catalog's names, the load as
it ran (a closed loop of N clients, or a rate and how it arrived), the mean lengths and the
measured statistics.
"""

from __future__ import annotations

import math
from typing import Any

from planner.bench.importers import CLIENTS
from planner.bench.results import BenchRun, Load, Stats, catalog_deployment
from planner.errors import UsageError
from planner.latency.catalog import Catalog
from planner.latency.serving_points import ServingRun

REPLAY_DURATION_S = 300.0  # an open-loop replay's length when the run's is not known (or longer)


# --- BenchRun -> ServingRun ----------------------------------------------------------------

# measured statistic of a ServingRun <- (BenchRun latency, Stats field)
_LATENCY_METRICS = {
    "ttft": "ttft",
    "tpot": "tpot",
    "e2e": "e2el",
}
_QUANTILES = {"mean": "mean", "p50": "p50", "p90": "p90", "p99": "p99"}
DATASET = "serving"  # one data set: runs of one deployment from several files are one configuration


def unreplayable(run: BenchRun) -> str | None:
    """Why a run cannot be replayed (None: it can): a burst at maximum rate measures queueing,
    and a run with no completed request or no lengths measured nothing to fit."""
    load = run.info.load
    if load.kind == "max" or load.value is None:
        return "a burst at maximum rate (every request at once): its latencies measure queueing"
    if not run.input_len or not run.output_len:
        return "no mean input and output lengths"
    if run.ttft.mean is None and run.e2el.mean is None and not run.output_throughput:
        return "no latency or throughput measured"
    return None


def serving_run(run: BenchRun, catalog: Catalog, row: int = 1) -> ServingRun:
    """The run as the simulator replays it: catalog names (a :class:`UsageError` names the
    option to pass), its load (``concurrency``: a closed loop of that many clients; ``rate``:
    requests per second, how they arrived in ``settings["arrival"]``), lengths and statistics.
    A run :func:`unreplayable` names is a :class:`UsageError`."""
    info = run.info
    problem = unreplayable(run)
    where = f"{info.source_file} (run {info.benchmark + 1}, {info.load.label()})"
    if problem is not None:
        raise UsageError(f"{where}: cannot be replayed: {problem}")
    gpu, model, precision, engine = catalog_deployment(run, catalog)
    measured: dict[str, float] = {}
    for prefix, latency in _LATENCY_METRICS.items():
        stats: Stats = getattr(run, latency)
        for suffix, field in _QUANTILES.items():
            value = getattr(stats, field)
            if value is not None and math.isfinite(value) and value > 0:
                measured[f"{prefix}_{suffix}"] = float(value)
    if run.output_throughput and math.isfinite(run.output_throughput):
        measured["output_tokens_per_s"] = float(run.output_throughput)
    load = info.load
    settings: dict[str, Any] = {}
    if load.kind == "qps":
        settings["arrival"] = load.arrival or "poisson"
        if load.max_concurrency:
            settings["max_concurrency"] = load.max_concurrency
    value = float(load.value or 0.0)
    if load.kind == "concurrency" and not CLIENTS.below(value):
        value = float(max(1, round(value)))
    duration = min(run.duration, REPLAY_DURATION_S) if run.duration > 0 else REPLAY_DURATION_S
    tool = f"{info.tool} {info.tool_version}" if info.tool_version else info.tool
    return ServingRun(
        dataset=DATASET,
        row=row,
        source=f"{tool}: {info.source_file}, run {info.benchmark + 1}",
        engine=engine,
        engine_version="",
        gpu=gpu,
        model=model,
        precision=precision,
        tp=info.tp,
        load_kind="concurrency" if load.kind == "concurrency" else "rate",
        load=value,
        input_tokens=float(run.input_len or 0.0),
        output_tokens=float(run.output_len or 0.0),
        measured=measured,
        duration_s=duration if load.kind == "qps" else 0.0,
        prefix_hit_rate=info.prefix_hit_rate or 0.0,
        settings=settings,
        # identical requests from GenAI-Perf's or AIPerf's clients stay in lock-step
        clients_start="waves"
        if load.kind == "concurrency" and info.tool.lower() in LOCK_STEP_TOOLS
        else "synchronized",
    )


LOCK_STEP_TOOLS = ("genai-perf", "aiperf")


def load_model(load: Load) -> str:
    """The load in words, as a replay makes it: ``closed loop, 100 clients`` or ``Poisson
    arrivals at 5 req/s``."""
    if load.kind == "max" or load.value is None:
        return "every request at once (maximum rate)"
    if load.kind == "concurrency":
        return f"closed loop, {load.value:g} clients"
    arrival = {"constant": "constant-rate", "gamma": "bursty (gamma)"}.get(
        load.arrival or "", "Poisson"
    )
    cap = f", at most {load.max_concurrency} in flight" if load.max_concurrency else ""
    return f"{arrival} arrivals at {load.value:g} req/s{cap}"
