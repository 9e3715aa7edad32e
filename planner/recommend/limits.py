"""What one recommendation may simulate, checked on values before and after its demand is
loaded: the requests of the verification window (the peak ``verify_hours``), which every one of
a recommendation's dozens of simulations replays, and a replayed dataset's size at its load
scale. Refusals name the settings a user can change, in the CLI's words or the dashboard's.

Loading the demand (and the hour counts of a stored dataset checked here first) is the use
case's: :mod:`planner.usecases.recommend`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from planner.errors import UsageError
from planner.recommend.inputs import Demand
from planner.recommend.sweep import peak_window

# Most requests one simulated verification window may hold (``--max-requests``): the simulator
# replays ~10,000 requests a second on one core, and a recommendation runs dozens of
# simulations of the peak window (up to twice its load in the growth check).
DEFAULT_MAX_REQUESTS = 1_000_000
SIMULATED_REQUESTS_PER_S = 10_000  # one core, for the estimate in the refusal
REPLAY_WINDOWS = 20  # a replayed dataset, held whole in memory: up to 20 x --max-requests


@dataclass(frozen=True)
class LimitNames:
    """How a refusal names the settings a user can change: the CLI's options by default."""

    load_scale: str = "--load-scale"
    verify_hours: str = "--verify-hours"
    max_requests: str = "--max-requests"
    window: str = "pick a window with --start/--end"


CLI_NAMES = LimitNames()


class WindowLimit:
    """What the machine can simulate: the requests of the verification window (the peak
    ``verify_hours``), which every one of a recommendation's dozens of simulations replays."""

    def __init__(
        self,
        max_requests: int,
        verify_hours: int,
        load_scale: float,
        names: LimitNames = CLI_NAMES,
    ) -> None:
        self.max_requests = max_requests
        self.verify_hours = verify_hours
        self.load_scale = load_scale
        self.names = names

    def _refuse(self, requests: float, what: str) -> UsageError:
        n = self.names
        minutes = requests / SIMULATED_REQUESTS_PER_S / 60
        scale = f" at {n.load_scale} {self.load_scale:g}" if self.load_scale != 1 else ""
        return UsageError(
            f"{what}{scale} holds {requests:,.0f} requests, more than {n.max_requests} "
            f"{self.max_requests:,}: each of the recommendation's dozens of simulations would "
            f"replay them (about {minutes:,.0f} minutes each on one core). Lower {n.load_scale} "
            f"or {n.verify_hours}, or raise {n.max_requests} to run it anyway"
        )

    def check(self, demand: Demand) -> None:
        """Refuse a demand whose verification window is too big to simulate."""
        rates = demand.curve.requests_per_hour
        first, last = peak_window(rates, self.verify_hours)
        requests = float(rates[first:last].sum())
        if requests > self.max_requests:
            hours = last - first
            raise self._refuse(
                requests, f"the demand's busiest {hours} hour{'s' if hours > 1 else ''}"
            )

    def check_replay(
        self, name: str, rates: NDArray[np.float64], total: int, load_scale: float
    ) -> None:
        """Before a dataset is read and scaled: its busiest hours (``rates``, its requests in
        each hour of the window) and its size (``total`` requests) at the scale (a replay is
        held whole in memory)."""
        first_hour, last_hour = peak_window(rates, self.verify_hours)
        requests = float(rates[first_hour:last_hour].sum()) * load_scale
        if requests > self.max_requests:
            hours = last_hour - first_hour
            raise self._refuse(
                requests, f"dataset {name!r}'s busiest {hours} hour{'s' if hours > 1 else ''}"
            )
        if load_scale > 1 and total * load_scale > REPLAY_WINDOWS * self.max_requests:
            said = self.names
            raise UsageError(
                f"{said.load_scale} {load_scale:g} makes dataset {name!r} "
                f"{total * load_scale:,.0f} requests to hold in memory, more than "
                f"{REPLAY_WINDOWS} x {said.max_requests} "
                f"({REPLAY_WINDOWS * self.max_requests:,}); {said.window}, lower "
                f"{said.load_scale}, or raise {said.max_requests}"
            )


def check_load_scale(load_scale: float, name: str = "--load-scale") -> None:
    """A load scale is a positive, finite multiple of the load."""
    if not (math.isfinite(load_scale) and load_scale > 0):
        raise UsageError(
            f"{name} {load_scale:g}: expected a positive number (1: the load as it is, 1.5: 50% "
            "more)"
        )
