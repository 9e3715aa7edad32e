"""Calibration from serving runs: replay each published run's load through the simulator,
compare what it predicts with what was measured, and fit an engine's profile so they agree.

BLIS's loop (observe, replay, calibrate) on planner's one step formula: a run at a
concurrency is replayed as that many synchronized closed-loop clients sending the run's
lengths (GenAI-Perf's lock-step waves come out of the replay, not out of a correction), a run
at a rate as Poisson arrivals for the run's length. The fit is robust least squares on log
errors (``scipy.optimize.least_squares``, soft-L1), and the error it reports is held out: each
configuration (engine, GPU, model, precision, TP of one data set) is predicted by a profile
fitted without any of its points.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.latency.model import LatencyModel
from planner.latency.profile import FIT_BOUNDS, Profile
from planner.latency.serving_points import ServingRun
from planner.simulate.closed_loop import ClosedLoop, run_closed_loop, run_open_loop
from planner.simulate.engine import RooflineStepTimes
from planner.simulate.run import ServingSpec

# what a fit matches: the statistics every benchmark reports (tails are checked, not fitted)
FIT_METRICS = (
    "ttft_mean",
    "tpot_mean",
    "e2e_mean",
    "output_tokens_per_s",
    "ttft_p50",
    "itl_p50",
    "tpot_p50",
)
# the step formula's parameters a serving fit determines
SERVING_FIT_PARAMS = (
    "compute_eff",
    "memory_eff",
    "attn_decode_eff",
    "attn_prefill_eff",
    "iteration_overhead_ms",
    "request_overhead_ms",
    "sequence_us",
    "allreduce_us",
    "comm_eff",
    "tp_eff_loss",
    "fp8_gemm_scale",
)
MAX_OPEN_LOOP_REQUESTS = 3000
UNSERVED = 1e3  # a prediction that never finished counts as 1000x off in a fit


def spec_of(run: ServingRun) -> ServingSpec:
    """The deployment a run used, with the engine's defaults where it stated none."""
    settings = run.settings
    return ServingSpec(
        gpu=run.gpu,
        model=run.model,
        precision=run.precision,
        tp=run.tp,
        engine=run.engine,
        max_seqs=settings.get("max_seqs"),
        max_batched_tokens=settings.get("max_batched_tokens"),
        memory_utilization=settings.get("memory_utilization"),
        chunked_prefill=bool(settings.get("chunked_prefill", True)),
        prefix_hit_rate=run.prefix_hit_rate,
        scheduler=settings.get("scheduler") or None,
        kv_cache=settings.get("kv_cache") or None,
    )


def replay(run: ServingRun, profile: Profile, *, seed: int = 0) -> dict[str, float]:
    """What the simulator predicts a run measured (the statistics of :data:`FIT_METRICS` and
    the tails, ms; output tokens/s)."""
    spec = spec_of(run)
    deployment = spec.deployment()
    engine = spec.engine_config(deployment)
    times = RooflineStepTimes(LatencyModel(deployment, profile), deployment.max_seqs)
    if run.input_lengths and len(run.input_lengths) == len(run.output_lengths):
        inputs = np.maximum(1, np.array(run.input_lengths, dtype=np.int64))
        outputs = np.maximum(1, np.array(run.output_lengths, dtype=np.int64))
    else:
        inputs = np.array([max(1, round(run.input_tokens))], dtype=np.int64)
        outputs = np.array([max(1, round(run.output_tokens))], dtype=np.int64)
    if run.load_kind == "concurrency":
        clients = int(run.load)
        # two measured waves after the first, at least 30 requests
        load = ClosedLoop(clients, max(3 * clients, 30), start=run.clients_start)
        result = run_closed_loop(times, engine, load, inputs, outputs).measured(clients)
    else:
        rng = np.random.default_rng(seed)
        count = min(MAX_OPEN_LOOP_REQUESTS, max(30, round(run.load * run.duration_s)))
        if run.settings.get("arrival") == "constant":
            arrivals = np.arange(1, count + 1, dtype=np.float64) / run.load
        else:  # Poisson, the default of every rate-based benchmark client
            arrivals = np.cumsum(rng.exponential(1.0 / run.load, count))
        result = run_open_loop(times, engine, arrivals, inputs, outputs)
        # the first tenth fills the engine from empty: a benchmark's stage runs far longer
        result = result.measured(count // 10)
    summary = result.summary()
    predicted = {k.removesuffix("_ms"): v for k, v in summary.items() if k.endswith("_ms")}
    predicted["itl_mean"] = predicted.get("tpot_mean", math.nan)
    predicted["itl_p50"] = predicted.get("tpot_p50", math.nan)
    predicted["output_tokens_per_s"] = summary["output_tokens_per_s"]
    if run.load_kind != "concurrency":
        # a rate run's throughput: its tokens over the span from the first arrival to the last
        # finish less one typical request's time (the drain after the last arrival), which is
        # the offered load while the engine keeps up and its service rate when it does not
        served = np.isfinite(result.finish)
        if served.any():
            drain = float(np.median((result.finish - result.arrival)[served]))
            span = float(result.finish[served].max() - result.arrival.min()) - drain
            if span > 0:
                tokens = float(result.output_tokens[served].sum())
                predicted["output_tokens_per_s"] = tokens / span
    return predicted


@dataclass(frozen=True)
class RunError:
    """One measured statistic of one run, and what was predicted for it."""

    run: ServingRun
    metric: str
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """Signed relative error, (predicted - measured) / measured."""
        return self.predicted / self.measured - 1.0


def run_errors(
    runs: Iterable[ServingRun], profile_for: Callable[[ServingRun], Profile]
) -> list[RunError]:
    """Every measured statistic of every run, against its replay under ``profile_for(run)``."""
    out = []
    for run in runs:
        predicted = replay(run, profile_for(run))
        for metric, measured in run.measured.items():
            value = predicted.get(metric, math.nan)
            out.append(RunError(run, metric, value if math.isfinite(value) else math.inf, measured))
    return out


def fit_serving(
    runs: Sequence[ServingRun],
    start: Profile,
    params: Sequence[str] = SERVING_FIT_PARAMS,
    *,
    metrics: Sequence[str] = FIT_METRICS,
    max_evaluations: int | None = None,
    extra: Callable[[Profile], np.ndarray] | None = None,
) -> Profile:
    """The profile whose ``params`` minimise robust log errors of ``metrics`` over ``runs``
    and of ``extra(profile)`` (further weighted log errors, e.g. offline measurements the
    profile must keep matching)."""
    from scipy.optimize import least_squares  # SciPy only when fitting

    params = [p for p in params if _informed(p, runs)]
    low = np.array([FIT_BOUNDS[p][0] for p in params])
    high = np.array([FIT_BOUNDS[p][1] for p in params])
    x0 = np.clip([getattr(start, p) for p in params], low, high)
    x0 = np.minimum(np.maximum(x0, low + 1e-6 * (high - low)), high - 1e-6 * (high - low))
    pairs = [
        (run, m, v)
        for run in runs
        for m, v in run.measured.items()
        # a rate run's throughput is its offered load while it keeps up: nothing to fit
        if m in metrics and not (m == "output_tokens_per_s" and run.load_kind != "concurrency")
    ]
    measured = np.log([v for _, _, v in pairs])
    # each data set weighs the same in all, however many statistics it has (795 NIM runs
    # would otherwise drown 23 MLPerf systems)
    per_set = Counter(run.dataset for run, _, _ in pairs)
    weights = np.sqrt([len(pairs) / (len(per_set) * per_set[run.dataset]) for run, _, _ in pairs])
    index = {id(run): i for i, run in enumerate(runs)}

    def residuals(x: np.ndarray) -> np.ndarray:
        profile = start.with_params(**dict(zip(params, map(float, x), strict=True)))
        predictions = [replay(run, profile) for run in runs]
        values = [predictions[index[id(run)]].get(m, math.nan) for run, m, _ in pairs]
        logged = np.log([v if math.isfinite(v) and v > 0 else UNSERVED * 1e6 for v in values])
        serving = np.asarray(weights * (logged - measured))
        return serving if extra is None else np.concatenate([serving, extra(profile)])

    result = least_squares(
        residuals,
        x0,
        bounds=(low, high),
        loss="soft_l1",
        f_scale=0.1,
        x_scale="jac",
        diff_step=0.05,  # the replays are event simulations: small steps see only their noise
        max_nfev=max_evaluations,
    )
    return start.with_params(**dict(zip(params, map(float, result.x), strict=True)))


def _informed(param: str, runs: Sequence[ServingRun]) -> bool:
    """Whether ``runs`` can tell ``param`` at all (all-reduce terms need TP, FP8 scales FP8)."""
    if param in ("allreduce_us", "comm_eff", "tp_eff_loss"):
        return any(run.tp > 1 for run in runs)
    if param == "fp8_gemm_scale":
        return any(run.precision == "fp8" for run in runs) and any(
            run.precision != "fp8" for run in runs
        )
    return True


def _constant(profile: Profile) -> Callable[[ServingRun], Profile]:
    return lambda _run: profile


def held_out_errors(
    runs: Sequence[ServingRun],
    start: Profile,
    params: Sequence[str] = SERVING_FIT_PARAMS,
    *,
    max_evaluations: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[RunError], dict[str, Profile]]:
    """Leave-one-configuration-out: each configuration's runs predicted by a profile fitted on
    the other configurations only. Returns the errors and each fold's profile."""
    configurations = sorted({run.configuration for run in runs})
    errors: list[RunError] = []
    folds: dict[str, Profile] = {}
    for configuration in configurations:
        if progress is not None:
            progress(configuration)
        train = [run for run in runs if run.configuration != configuration]
        test = [run for run in runs if run.configuration == configuration]
        profile = fit_serving(train, start, params, max_evaluations=max_evaluations)
        folds[configuration] = replace(profile, name=f"{start.name} without {configuration}")
        errors.extend(run_errors(test, _constant(profile)))
    return errors, folds
