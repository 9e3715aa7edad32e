"""Workloads built by hand for tests: requests of one length at given arrival times."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from numpy.typing import ArrayLike

from planner.simulate.workload import Workload

START = datetime(2024, 1, 1, tzinfo=UTC)


def uniform_workload(
    arrival_s: ArrayLike,
    input_tokens: int,
    output_tokens: int,
    *,
    start: datetime = START,
    class_index: ArrayLike | None = None,
    classes: tuple[str, ...] = ("default",),
) -> Workload:
    """Every request ``input_tokens`` in and ``output_tokens`` out, arriving at ``arrival_s``
    (seconds from ``start``); of class 0 unless ``class_index`` says otherwise."""
    arrivals = np.asarray(arrival_s, dtype=np.float64)
    n = len(arrivals)
    return Workload(
        start=start,
        arrival_s=arrivals,
        input_tokens=np.full(n, input_tokens, dtype=np.int64),
        output_tokens=np.full(n, output_tokens, dtype=np.int64),
        class_index=(
            np.zeros(n, dtype=np.int16)
            if class_index is None
            else np.asarray(class_index, dtype=np.int16)
        ),
        classes=classes,
    )
