"""The simulation phases of a recommendation: screened candidates verified in rounds (cheapest
first, escalated on a miss), the winner tightened onto fewer replicas, and its growth check.

A :class:`Sweep` holds what those phases share: the request, the hourly rates, the verification
windows' requests, the results of every distinct simulation (a fleet is never simulated twice)
and the runner (serial, process pool or Dask).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.latency.profile import Profile
from planner.recommend.inputs import Request
from planner.recommend.plan import PlanChoice, cheapest, purchase_plans
from planner.recommend.screen import Capacity, hourly_instances, hourly_replicas
from planner.recommend.space import Candidate
from planner.recommend.verify import Runner, Verification, VerifyTask, Window
from planner.simulate.workload import Workload

StageProgress = Callable[[str, int, int], None]  # stage, done, total
ENGINE_VARIANTS_PER_GROUP = 2  # verified per instance, model, precision and TP in one batch
GROWTH_FACTORS = (1.1, 1.2, 1.3, 1.5, 1.75, 2.0)  # peak-hour load multiples tried on the winner
TIGHTEN_FACTOR = 1.05  # load per replica added at each tightening step (then rounded up)


@dataclass
class Screened:
    """A candidate that passed the screen: its capacity, fleet and cheapest plan."""

    candidate: Candidate
    capacity: Capacity
    rps_per_replica: float  # capacity used for sizing (lowered on failed verifications)
    replicas: NDArray[np.int64]  # replicas per hour (whole instances' worth)
    instances: NDArray[np.int64]
    plan: PlanChoice
    verifications: list[Verification] = field(default_factory=list)
    tightened: int = 0  # steps the winner's fleet shrank below the screen's size, verified
    load_headroom: dict[str, Any] | None = None  # growth the winner's fleet absorbs as it is

    @property
    def monthly_usd(self) -> float:
        return self.plan.monthly_usd

    @property
    def verified(self) -> Verification | None:
        return self.verifications[-1] if self.verifications else None

    @property
    def passed(self) -> bool:
        return self.verified is not None and self.verified.passed


def size(
    cand: Candidate, capacity: Capacity, rps: float, request: Request, spot: float
) -> Screened:
    """The hourly fleet that serves the demand at ``rps`` per replica, and its cheapest plan."""
    rates = request.demand.curve.requests_per_hour
    replicas_needed = hourly_replicas(rates, rps, request.constraints.min_replicas)
    instances = hourly_instances(replicas_needed, cand.replicas_per_instance)
    plan = cheapest(purchase_plans(instances, cand.offer, request.constraints, spot))
    # every paid GPU serves: an instance's spare replicas join the fleet
    return Screened(cand, capacity, rps, instances * cand.replicas_per_instance, instances, plan)


def rank_key(s: Screened) -> tuple[float, float, bool, int]:
    """Cheapest first; on a tie the smaller quality loss, the model asked for before its
    alternatives, then the catalog order."""
    c = s.candidate
    return (round(s.monthly_usd, 6), -c.quality_delta_pct, c.alternative, c.id)


def peak_window(rates: NDArray[np.float64], hours: int) -> Window:
    """The ``hours`` consecutive hours with the most requests (the first such, on ties)."""
    hours = min(hours, len(rates))
    sums = np.convolve(rates, np.ones(hours), mode="valid")
    first = int(np.argmax(sums))
    return (first, first + hours)


def next_batch(remaining: list[Screened], size: int, below: float) -> list[Screened]:
    """Take (from the cheapest) up to ``size`` candidates screened below ``below`` $/month,
    at most two engine settings per instance, model, precision and TP, so the alternatives
    differ."""
    batch: list[Screened] = []
    per_group: Counter[tuple[str, str, str, int]] = Counter()
    for s in list(remaining):
        if len(batch) >= size or s.monthly_usd >= below:
            break
        c = s.candidate
        group = (c.offer.label, c.model, c.precision, c.tp)
        if per_group[group] >= ENGINE_VARIANTS_PER_GROUP:
            continue
        per_group[group] += 1
        batch.append(s)
        remaining.remove(s)
    return batch


def best_per_gpu(remaining: list[Screened], done: set[str]) -> list[Screened]:
    """The cheapest remaining candidate of each GPU type not in ``done``."""
    batch: list[Screened] = []
    for s in list(remaining):
        gpu = s.candidate.offer.gpu
        if gpu not in done:
            done = done | {gpu}
            batch.append(s)
            remaining.remove(s)
    return batch


@dataclass
class Sweep:
    request: Request
    spot: float
    profiles: dict[str, Profile]
    runner: Runner
    progress: StageProgress | None = None
    workloads: dict[Window, Workload] = field(default_factory=dict)
    simulated: dict[tuple[Any, ...], Verification] = field(default_factory=dict)
    rounds: int = 0
    peak: Window = field(init=False)  # the verification window every candidate shares
    # with a confidence margin: the cheapest fleet simulated whose point P99s met the targets
    # (what the recommendation would cost without the margin), and how it was found
    point_best: Screened | None = None
    point_how: str = ""

    def __post_init__(self) -> None:
        options = self.request.options
        self.peak = peak_window(self.request.demand.curve.requests_per_hour, options.verify_hours)

    # --- the candidates ----------------------------------------------------------------------

    def verify_cheapest(self, affordable: list[Screened]) -> tuple[list[Screened], list[Screened]]:
        """Verify the cheapest candidates, then more while an unverified one screened cheaper
        than the best verified (up to 3 x verify_top), then the best of every other GPU type.
        Returns (verified, never simulated)."""
        options = self.request.options
        remaining = list(affordable)
        verified: list[Screened] = []
        queue = next_batch(remaining, options.verify_top, math.inf)
        compared = False
        while queue:
            self.verify(queue)
            verified.extend(queue)
            best = min((s.monthly_usd for s in verified if s.passed), default=math.inf)
            room = options.verify_top * 3 - len(verified)
            queue = next_batch(remaining, min(options.verify_top, room), best)
            if not queue and options.compare_gpus and not compared:
                # the best of every other GPU type, so the table answers "what would X cost"
                compared = True
                queue = best_per_gpu(remaining, {s.candidate.offer.gpu for s in verified})
        return verified, remaining

    def verify(self, batch: list[Screened]) -> None:
        """Simulate each candidate; one that misses is re-sized for 15% less load per replica
        and simulated again, up to max_attempts."""
        options = self.request.options
        self.rounds += 1
        pending = batch
        for attempt in range(1, options.max_attempts + 1):
            if not pending:
                break
            tasks = [self.task(s, attempt) for s in pending]
            results = self.run(f"verify (round {self.rounds}, attempt {attempt})", tasks)
            for s, result in zip(pending, results, strict=True):
                s.verifications.append(result)
                if result.passed_on_points:
                    self.note_point(s, f"verified (attempt {attempt})")
            pending = [s for s in pending if not s.passed]
            if attempt < options.max_attempts:
                for s in pending:
                    bigger = self.resized(s, options.escalation)
                    if bigger is not None:
                        adopt(s, bigger)

    # --- the winner --------------------------------------------------------------------------

    def tighten(self, leader: Screened) -> None:
        """The screen is mostly conservative (docs/recommender.md): try the winner on fewer
        replicas while it passes, its peak hour also at ``1 + tighten_margin`` times the load."""
        options = self.request.options
        for _ in range(options.tighten_steps):
            smaller = self.resized(leader, TIGHTEN_FACTOR)
            if smaller is None:
                return
            task = self.task(smaller, len(leader.verifications) + 1)
            tasks = [task]
            if options.tighten_margin > 0:
                margin = 1 + options.tighten_margin
                tasks.append(replace(task, windows=(self.peak,), load_scale=margin, attempt=0))
            results = self.run(f"tighten (step {leader.tightened + 1})", tasks)
            if all(r.passed_on_points for r in results):
                self.note_point(smaller, f"tightened (step {leader.tightened + 1})")
            if not all(r.passed for r in results):
                return
            adopt(leader, smaller)
            leader.verifications.append(results[0])
            leader.tightened += 1

    def growth(self, leader: Screened) -> dict[str, Any]:
        """How much more peak load the winner's fleet holds as it is: its peak window simulated
        at each of GROWTH_FACTORS times the load (all at once, on the runner)."""
        base = self.task(leader, len(leader.verifications) + 1)
        tasks = [
            replace(base, windows=(self.peak,), load_scale=factor, attempt=0)
            for factor in GROWTH_FACTORS
        ]
        results = self.run("load growth check", tasks)
        holds = 1.0
        for factor, result in zip(GROWTH_FACTORS, results, strict=True):
            if not result.passed:
                break
            holds = factor
        return {
            "holds_up_to": holds,
            "checked": [
                {
                    "load": factor,
                    "passed": result.passed,
                    "p99": result.p99,
                    "misses": [m.describe() for m in result.misses],
                }
                for factor, result in zip(GROWTH_FACTORS, results, strict=True)
            ],
        }

    # --- the margin's cost ---------------------------------------------------------------------

    def note_point(self, s: Screened, how: str) -> None:
        """Keep ``s``'s fleet as it is now when it is the cheapest that met the targets on the
        point estimates so far."""
        if self.point_best is None or rank_key(s) < rank_key(self.point_best):
            self.point_best = replace(s, verifications=list(s.verifications))
            self.point_how = how

    def point_sized(self, leader: Screened, capacity: Capacity) -> None:
        """The winner's configuration sized by the screen without the margin (``capacity``,
        with the same adjustment the verification made to the margin's sizing), simulated on
        the point estimates like a tightening step (its peak hour also at +tighten_margin): if
        it passes, the cheapest point-estimate fleet may be this one."""
        if capacity.rps <= 0 or leader.capacity.rps <= 0:
            return
        rps = capacity.rps * leader.rps_per_replica / leader.capacity.rps
        if rps <= leader.rps_per_replica:
            return
        smaller = size(leader.candidate, capacity, rps, self.request, self.spot)
        if self.point_best is not None and rank_key(smaller) >= rank_key(self.point_best):
            return
        task = replace(self.task(smaller, 0), confidence=None, factors=())
        tasks = [task]
        margin = self.request.options.tighten_margin
        if margin > 0:
            tasks.append(replace(task, windows=(self.peak,), load_scale=1 + margin))
        results = self.run("point-estimate fleet", tasks)
        if all(r.passed for r in results):
            smaller.verifications.append(results[0])
            self.note_point(smaller, "the winner's configuration sized without the margin")

    # --- shared ------------------------------------------------------------------------------

    def resized(self, s: Screened, factor: float) -> Screened | None:
        """The candidate sized for ``factor`` times its load per replica (below 1: more
        replicas), stepping until the fleet changes in some hour; None when it cannot (far past
        the replica's throughput, or at the minimum fleet)."""
        rps = s.rps_per_replica
        for _ in range(40):
            rps *= factor
            if rps > 2 * s.capacity.max_rps:
                return None
            other = size(s.candidate, s.capacity, rps, self.request, self.spot)
            changed = other.instances > s.instances if factor < 1 else other.instances < s.instances
            if np.any(changed):
                return other
        return None

    def task(self, s: Screened, attempt: int) -> VerifyTask:
        """The peak window, plus the hour where this fleet's replicas are busiest if outside
        it (rounding to whole instances makes the load per replica differ by hour)."""
        request = self.request
        rates = request.demand.curve.requests_per_hour
        # an hour with requests and no replica is the worst, an idle one the least
        per_replica = np.where(
            s.replicas > 0, rates / np.maximum(s.replicas, 1), np.where(rates > 0, np.inf, 0.0)
        )
        busiest = int(np.argmax(per_replica))
        windows: list[Window] = [self.peak]
        if not self.peak[0] <= busiest < self.peak[1]:
            windows.append((busiest, busiest + 1))
        seed = request.options.seed
        for w in windows:
            if w not in self.workloads:
                self.workloads[w] = request.demand.window(w[0], w[1], seed + w[0])
        c = s.candidate
        margin = request.margin
        return VerifyTask(
            candidate_id=c.id,
            attempt=attempt,
            serving=c.serving(request.constraints),
            profile=self.profiles[c.offer.gpu],
            windows=tuple(windows),
            replicas=tuple(int(r) for r in s.replicas),
            gpus_per_replica=c.tp,
            slos=request.targets.slos,
            min_attainment=request.targets.min_attainment,
            seed=seed,
            confidence=margin.confidence,
            factors=tuple(margin.factors(c.offer.gpu).items()),
        )

    def run(self, stage: str, tasks: list[VerifyTask]) -> list[Verification]:
        """Verifications of ``tasks``, simulating each distinct fleet once."""
        fresh: dict[tuple[Any, ...], VerifyTask] = {}
        for task in tasks:
            key = task.simulation_key()
            if key not in self.simulated:
                fresh.setdefault(key, task)
        progress = self.progress

        def report(done: int, total: int) -> None:
            if progress is not None:
                progress(stage, done, total)

        report(0, len(fresh))
        results = self.runner.run(list(fresh.values()), self.workloads, report)
        for key, result in zip(fresh, results, strict=True):
            self.simulated[key] = result
        return [
            replace(
                self.simulated[t.simulation_key()], candidate_id=t.candidate_id, attempt=t.attempt
            )
            for t in tasks
        ]


def adopt(s: Screened, other: Screened) -> None:
    """Take ``other``'s sizing (its load per replica, fleet and plan), keeping the history."""
    s.rps_per_replica = other.rps_per_replica
    s.replicas, s.instances, s.plan = other.replicas, other.instances, other.plan
