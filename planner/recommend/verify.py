"""Verification: a screened candidate's hourly fleet through the discrete-event simulator on
the real arrival pattern of the hours that matter (the peak window, and the hour where its
replicas are busiest), with P99s checked against every class's targets.

Tasks are pure functions of their inputs, so a sweep gives the same results serially, on a
local process pool, or on a Dask cluster (``--dask``); results come back in task order.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from planner.errors import UsageError
from planner.latency.profile import Profile
from planner.recommend.margin import p99_upper
from planner.simulate.fleet import FleetConfig, Overflow
from planner.simulate.metrics import SLO
from planner.simulate.run import ServingSpec, simulate
from planner.simulate.workload import Workload

Window = tuple[int, int]  # [first hour, last hour) of the horizon
#: an overflow API's counts in a verification, and the fleet statistics they sum
OVERFLOW_COUNTS = {
    "requests": "overflowed",
    "input_tokens": "overflow_input_tokens",
    "output_tokens": "overflow_output_tokens",
    "rate_limited": "overflow_rate_limited",
}
Progress = Callable[[int, int], None]
PARENT_POLL_S = 0.5  # how often a pool worker checks that the process that started it lives
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class DecodePool:
    """A disaggregated fleet's decode pool (the task's ``serving`` and ``replicas`` are then its
    prefill pool's) and the link the KV cache crosses (planner.simulate.disagg)."""

    serving: ServingSpec
    profile: Profile
    replicas: tuple[int, ...]  # decode replicas each hour of the horizon
    link: str
    first_token: str | None = None


@dataclass(frozen=True)
class VerifyTask:
    candidate_id: int
    attempt: int
    serving: ServingSpec
    profile: Profile
    windows: tuple[Window, ...]
    replicas: tuple[int, ...]  # replicas each hour of the horizon
    gpus_per_replica: int
    slos: dict[str, SLO]
    min_attainment: float | None
    seed: int
    load_scale: float = 1.0  # the windows' requests at this multiple of their rate
    # the P99s are checked at this confidence's upper bound (None: the point estimates), with
    # each metric's model factor (planner.recommend.margin)
    confidence: float | None = None
    factors: tuple[tuple[str, float], ...] = ()
    decode: DecodePool | None = None  # set: a disaggregated fleet
    overflow: Overflow | None = None  # set: a per-token API takes what the replicas cannot

    def simulation_key(self) -> tuple[Any, ...]:
        """What the simulation depends on besides the shared targets: candidates on different
        instance types or regions with the same replicas and engine simulate identically."""
        fleet = tuple(tuple(self.replicas[a:b]) for a, b in self.windows)
        return (
            self.serving,
            self.profile,
            self.windows,
            fleet,
            self.gpus_per_replica,
            self.seed,
            self.load_scale,
            self.confidence,
            self.factors,
            self.decode
            and (
                self.decode.serving,
                self.decode.profile,
                tuple(tuple(self.decode.replicas[a:b]) for a, b in self.windows),
                self.decode.link,
                self.decode.first_token,
            ),
            self.overflow,
        )


@dataclass(frozen=True)
class Miss:
    klass: str
    metric: str  # ttft, tpot, e2e, attainment, refused
    value: float
    target: float
    point: float | None = None  # the simulated P99 when ``value`` is its upper bound

    @property
    def over_pct(self) -> float:
        return (self.value / self.target - 1) * 100 if self.target else 100.0

    def describe(self) -> str:
        if self.metric == "attainment":
            return (
                f"{self.klass}: SLO attainment {self.value:.2%} below the {self.target:.2%} "
                "required"
            )
        if self.metric == "refused":
            return f"{self.klass}: {self.value:.0f} requests refused (longer than the KV cache)"
        bound = (
            f" at the upper bound (simulated {self.point * 1e3:,.0f} ms)"
            if self.point is not None
            else ""
        )
        return (
            f"{self.klass}: P99 {self.metric.upper()} {self.value * 1e3:,.0f} ms{bound} over the "
            f"{self.target * 1e3:,.0f} ms target (+{self.over_pct:.0f}%)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.klass,
            "metric": self.metric,
            "value": self.value,
            "target": self.target,
            "point": self.point,
            "over_pct": self.over_pct,
            "detail": self.describe(),
        }


@dataclass(frozen=True)
class Verification:
    candidate_id: int
    attempt: int
    windows: tuple[Window, ...]
    p99: dict[str, dict[str, float | None]]  # class -> ttft/tpot/e2e (s), worst window
    attainment: dict[str, float | None]  # class -> share meeting every target
    requests: int
    refused: int
    wall_s: float
    misses: tuple[Miss, ...] = field(default_factory=tuple)
    # with a confidence: each P99's combined upper bound (class -> metric -> s, worst window),
    # and whether the point P99s alone met the targets
    upper: dict[str, dict[str, float | None]] = field(default_factory=dict)
    point_passed: bool | None = None
    # a disaggregated fleet: the transfer, the decode wait and each pool, from the window with
    # the longest P99 TTFT (planner.simulate.disagg)
    disaggregation: dict[str, Any] | None = None
    # with an overflow API: the requests and tokens it served and those its rate limit sent
    # back, over all windows
    overflow: dict[str, int] | None = None

    @property
    def passed(self) -> bool:
        return not self.misses

    @property
    def passed_on_points(self) -> bool:
        return self.passed if self.point_passed is None else self.point_passed

    def worst_upper(self, metric: str) -> float | None:
        values = [v[metric] for v in self.upper.values() if v.get(metric) is not None]
        return max(v for v in values if v is not None) if values else None

    def worst(self, metric: str) -> float | None:
        values = [v[metric] for v in self.p99.values() if v.get(metric) is not None]
        return max(v for v in values if v is not None) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "passed": self.passed,
            "windows": [list(w) for w in self.windows],
            "p99": self.p99,
            "attainment": self.attainment,
            "requests": self.requests,
            "refused": self.refused,
            "simulation_wall_s": self.wall_s,
            "misses": [m.to_dict() for m in self.misses],
            "p99_upper": self.upper or None,
            "passed_on_points": self.passed_on_points,
            **({"disaggregation": self.disaggregation} if self.disaggregation else {}),
            **({"overflow": self.overflow} if self.overflow is not None else {}),
        }


def verify(task: VerifyTask, workloads: Mapping[Window, Workload]) -> Verification:
    """Simulate the task's windows and check every class's P99s and attainment."""
    p99: dict[str, dict[str, float | None]] = {}
    upper: dict[str, dict[str, float | None]] = {}
    factors = dict(task.factors)
    met: dict[str, int] = {}
    seen: dict[str, int] = {}
    requests = refused = 0
    wall = 0.0
    disaggregation: dict[str, Any] | None = None
    worst_ttft = -1.0
    overflow = dict.fromkeys(OVERFLOW_COUNTS, 0) if task.overflow is not None else None
    for first, last in task.windows:
        workload = workloads[(first, last)]
        if len(workload) == 0:
            continue
        if task.load_scale != 1.0:
            workload = workload.scaled(task.load_scale, task.seed)
        result = _simulate_window(task, workload, first, last)
        ttft99 = result.summary["all"]["ttft"]["p99"]
        if result.disaggregation is not None and (ttft99 or 0.0) > worst_ttft:
            disaggregation, worst_ttft = result.disaggregation, ttft99 or 0.0
        wall += result.wall_s
        requests += result.requests
        refused += result.fleet.rejected_too_long + result.fleet.rejected_no_replica
        if overflow is not None:
            for name, field_name in OVERFLOW_COUNTS.items():
                overflow[name] += getattr(result.fleet, field_name)
        for name, stats in result.summary["classes"].items():
            worst = p99.setdefault(name, {"ttft": None, "tpot": None, "e2e": None})
            for metric in ("ttft", "tpot", "e2e"):
                _keep_worst(worst, metric, stats[metric]["p99"])
                if task.confidence is not None:
                    bound = p99_upper(
                        stats[metric],
                        int(stats["finished"]),
                        task.confidence,
                        factors.get(metric, 1.0),
                    )
                    _keep_worst(upper.setdefault(name, {}), metric, bound)
            met[name] = met.get(name, 0) + stats["slo_met"]
            seen[name] = seen.get(name, 0) + stats["requests"]
    attainment = {name: (met[name] / seen[name] if seen[name] else None) for name in seen}
    misses: list[Miss] = []
    point_misses = 0
    for name, slo in task.slos.items():
        worst = p99.get(name, {})
        bounds = upper.get(name, {})
        for metric, target in (("ttft", slo.ttft_s), ("tpot", slo.tpot_s), ("e2e", slo.e2e_s)):
            value = worst.get(metric)
            if target is None or value is None:
                continue
            point_misses += value > target
            bound = bounds.get(metric) if task.confidence is not None else None
            if bound is not None and bound > target:
                misses.append(Miss(name, metric, bound, target, point=value))
            elif bound is None and value > target:
                misses.append(Miss(name, metric, value, target))
        share = attainment.get(name)
        if task.min_attainment is not None and share is not None and share < task.min_attainment:
            misses.append(Miss(name, "attainment", share, task.min_attainment))
    if refused:
        misses.append(Miss("all", "refused", float(refused), 0.0))
    latency = sum(m.metric in ("ttft", "tpot", "e2e") for m in misses)
    return Verification(
        task.candidate_id,
        task.attempt,
        task.windows,
        p99,
        attainment,
        requests,
        refused,
        wall,
        tuple(misses),
        upper,
        # the point P99s pass when only upper bounds missed
        None if task.confidence is None else (len(misses) - latency + point_misses) == 0,
        disaggregation,
        overflow,
    )


def _simulate_window(task: VerifyTask, workload: Workload, first: int, last: int) -> Any:
    """The task's fleet over hours [first, last): one pool, or a prefill and a decode pool."""
    schedule = list(task.replicas[first:last])
    fleet = FleetConfig(
        schedule=schedule,
        gpus_per_replica=task.gpus_per_replica,
        overflow=task.overflow,
        seed=task.seed,
    )
    if task.decode is None:
        return simulate(workload, task.serving, fleet, task.profile, slos=task.slos)
    from planner.simulate.disagg import DisaggregatedSpec, simulate_disaggregated

    pool = task.decode
    return simulate_disaggregated(
        workload,
        DisaggregatedSpec(task.serving, pool.serving, pool.link, pool.first_token),
        fleet,
        FleetConfig(schedule=list(pool.replicas[first:last]), seed=task.seed),
        task.profile,
        pool.profile,
        slos=task.slos,
    )


def _keep_worst(worst: dict[str, float | None], metric: str, value: float | None) -> None:
    held = worst.get(metric)
    if value is not None and (held is None or value > held):
        worst[metric] = value


# --- running many: serially, on a process pool, on Dask ----------------------------------------


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def max_local_workers() -> int:
    """The most local processes a sweep may start: four per core (a simulation is CPU-bound;
    more only share the cores and multiply the memory)."""
    return 4 * default_workers()


def _worker_init(pdeathsig: bool) -> None:
    """Start of every pool worker: it dies with the process that started it (a SIGKILL or
    SIGTERM to ``planner recommend`` must not leave simulations running for half an hour), and
    leaves Ctrl-C and SIGTERM handling to that process (a forked worker inherits its handlers).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()
    if pdeathsig and sys.platform.startswith("linux"):
        # the kernel kills us the moment the forking thread (the main thread) ends
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - not glibc/musl
            pass
    # everywhere (and should the parent have died before prctl): re-parenting is its death
    threading.Thread(
        target=_exit_when_orphaned, args=(parent,), name="planner-parent-watch", daemon=True
    ).start()


def _exit_when_orphaned(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(PARENT_POLL_S)


class Runner:
    """Runs verification tasks; one runner serves every round of a sweep (a pool or a Dask
    cluster starts once). ``workers=1`` runs in this process."""

    def __init__(self, workers: int = 0, dask: str | None = None) -> None:
        self.workers = workers or default_workers()
        self.dask = dask
        self._client: Any = None
        self._cluster: Any = None
        self._pool: ProcessPoolExecutor | None = None  # started on first use, kept for all rounds

    @property
    def description(self) -> str:
        if self.dask is not None:
            return f"dask {self.dask}"
        return "serial" if self.workers == 1 else f"{self.workers} local processes"

    def __enter__(self) -> Runner:
        if self.dask is not None:
            self._start_dask()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.close(abort=exc_type is not None)

    def close(self, abort: bool = False) -> None:
        """Stop the pool or the Dask cluster. ``abort`` (an error, Ctrl-C, SIGTERM): the
        workers are killed at once rather than left to finish their simulations."""
        pool, self._pool = self._pool, None
        if pool is not None:
            if abort:
                _kill_pool(pool)
            else:
                pool.shutdown()
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    def _start_dask(self) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:  # pragma: no cover - a dependency
            raise UsageError("--dask needs the 'distributed' package") from exc
        if self.dask == "local":
            self._cluster = LocalCluster(
                n_workers=self.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(self.dask, timeout=10)
            except (OSError, ValueError, TypeError) as exc:  # unreachable, or not an address
                raise UsageError(
                    f"--dask {self.dask}: could not reach the Dask scheduler ({exc})"
                ) from exc

    def run(
        self,
        tasks: Sequence[VerifyTask],
        workloads: Mapping[Window, Workload],
        progress: Progress | None = None,
    ) -> list[Verification]:
        """Verifications in the order of ``tasks``."""
        if not tasks:
            return []
        if self._client is not None:
            return self._run_dask(tasks, workloads, progress)
        if self.workers == 1 or len(tasks) == 1:
            results = []
            for i, task in enumerate(tasks):
                results.append(verify(task, workloads))
                if progress:
                    progress(i + 1, len(tasks))
            return results
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                initializer=_worker_init,
                initargs=(threading.current_thread() is threading.main_thread(),),
            )
        # each task carries only its own windows' requests
        futures = [
            self._pool.submit(verify, task, {w: workloads[w] for w in task.windows})
            for task in tasks
        ]
        results = []
        for i, future in enumerate(futures):
            results.append(future.result())
            if progress:
                progress(i + 1, len(tasks))
        return results

    def _run_dask(
        self,
        tasks: Sequence[VerifyTask],
        workloads: Mapping[Window, Workload],
        progress: Progress | None,
    ) -> list[Verification]:
        from distributed import as_completed

        client = self._client
        # hash=False: a fresh key each run; content-hashed keys collide with the previous run's
        # copy while it is being released and cancel the tasks (dask/distributed#8576).
        # One object (the dict of windows), sent to every worker.
        [shared] = client.scatter(
            [dict(workloads)], broadcast=True, hash=False
        )  # one object, every worker
        futures = [client.submit(verify, task, shared, pure=False) for task in tasks]
        for done, _ in enumerate(as_completed(futures), start=1):
            if progress:
                progress(done, len(tasks))
        results: list[Verification] = client.gather(futures)
        return results


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Kill a pool's workers now; a plain shutdown would wait for their running tasks."""
    # the executor has no public list of its processes
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)
    # Python 3.11's exit hook wakes the pool's manager thread through a pipe that thread
    # closes as it ends, unlocked (CPython gh-105829): a race that printed "Bad file
    # descriptor" at exit. Once the thread has ended its pipe is marked closed and left alone.
    if manager is not None and manager is not threading.current_thread():
        manager.join(timeout=5)
