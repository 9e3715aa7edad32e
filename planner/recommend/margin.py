"""The confidence margin: a fleet sized so the P99 targets hold at the upper end of the
prediction's interval, not only at its point (``recommend --confidence``).

The screen plans against each target shrunk by the model's error factor (``target x (1 +
q(1 - c))``, ``q`` the held-out errors of the engine and GPU class:
:mod:`planner.latency.uncertainty`); the verification checks each simulated P99's combined
upper bound (the order-statistic bound of the P99 from the simulated requests over ``1 + q(1 -
c)``) against the target. A model that over-predicts is not trusted to shrink a fleet: the
factor is never below 1. No confidence (0, "none"): the point estimates, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.latency.uncertainty import (
    NO_ACCURACY,
    Accuracy,
    ErrorChoice,
    sampling_bounds,
    sizing_factor,
    summary_quantile,
)
from planner.simulate.metrics import SLO

METRICS = ("ttft", "tpot", "e2e")
P99 = 0.99


@dataclass(frozen=True)
class Margin:
    """``confidence`` (None: no margin) and the held-out errors it is taken from."""

    confidence: float | None = None
    engine: str = "*"
    accuracy: Accuracy = NO_ACCURACY

    @property
    def on(self) -> bool:
        return self.confidence is not None

    def choices(self, gpu: str) -> dict[str, ErrorChoice]:
        """The error group of each metric's P99 on ``gpu``."""
        return {m: self.accuracy.lookup(self.engine, gpu, m, "p99") for m in METRICS}

    def factors(self, gpu: str) -> dict[str, float]:
        """Each metric's sizing factor on ``gpu`` (>= 1; all 1 without a confidence)."""
        if self.confidence is None:
            return dict.fromkeys(METRICS, 1.0)
        return {m: sizing_factor(c.group, self.confidence) for m, c in self.choices(gpu).items()}

    def shrink(self, slo: SLO, gpu: str) -> SLO:
        """The targets the screen plans against on ``gpu``: each divided by its factor."""
        if self.confidence is None:
            return slo
        f = self.factors(gpu)
        return SLO(
            None if slo.ttft_s is None else slo.ttft_s / f["ttft"],
            None if slo.tpot_s is None else slo.tpot_s / f["tpot"],
            None if slo.e2e_s is None else slo.e2e_s / f["e2e"],
        )


def p99_upper(
    stats: Mapping[str, float | None], requests: int, confidence: float, factor: float
) -> float | None:
    """The combined upper bound of a simulated P99 (``stats``: the summary's p50 .. max of
    one metric, from ``requests`` requests): the order-statistic bound over the model's
    factor. None when the metric has no value."""
    point = stats.get("p99")
    if point is None:
        return None

    def quantile(q: float) -> float | None:
        return summary_quantile(stats, q)

    bounds = sampling_bounds(requests, P99, confidence, quantile, two_sided=False)
    sampled = max(bounds.high, point) if bounds is not None else point
    return sampled * factor


def margin_summary(
    margin: Margin,
    gpu: str | None,
    targets: SLO,
    point: Mapping[str, float | None],
    upper: Mapping[str, float | None],
) -> dict[str, Any]:
    """Per target: the target, what the screen planned against, the point P99, its upper
    bound, the model's factor and the error group (the winner's GPU; None: no winner)."""
    out: dict[str, Any] = {}
    given = {"ttft": targets.ttft_s, "tpot": targets.tpot_s, "e2e": targets.e2e_s}
    choices = margin.choices(gpu) if gpu is not None else {}
    factors = margin.factors(gpu) if gpu is not None else dict.fromkeys(METRICS, 1.0)
    for m in METRICS:
        target = given[m]
        out[m] = {
            "target_s": target,
            "screen_target_s": None if target is None else target / factors[m],
            "point_p99_s": point.get(m),
            "upper_s": upper.get(m) if margin.on else None,
            "model_factor": factors[m],
            "error_group": choices[m].to_dict() if m in choices else None,
        }
    return out
