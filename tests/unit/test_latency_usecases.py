"""The predict and calibrate use cases check their request before they open the store: a wrong
input is refused naming its option, and ``sessions`` is never called."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from planner.errors import PlannerError, UsageError
from planner.latency.predict import LatencyQuery
from planner.paths import data_dir
from planner.usecases.calibrate import CalibrateRequest, calibrate
from planner.usecases.predict import predict_latency

PUBLISHED = data_dir() / "reference" / "published_latency.csv"


def no_store() -> AbstractContextManager[Session | None]:
    raise AssertionError("the store was opened before the request was checked")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (LatencyQuery(gpu="L4", model="llama-3.1-8b", qps=math.nan), "--qps nan"),
        (LatencyQuery(gpu="L4", model="llama-3.1-8b", tp=0), "--tp 0"),
        (LatencyQuery(gpu="L4", model="llama-3.1-8b", input_tokens=200_000), "context"),
        (LatencyQuery(gpu="L4", model="llama-3.1-8b", kv_cache="fp7"), "--kv-cache"),
    ],
)
def test_predict_refuses_a_wrong_query_before_the_store(query: LatencyQuery, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        predict_latency(query, no_store)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (CalibrateRequest((PUBLISHED,), "x", holdout=1.0), "--holdout 1"),
        (CalibrateRequest((PUBLISHED,), " "), "--name"),
        (CalibrateRequest((PUBLISHED,), "x", vendor="Acme"), "--vendor 'Acme'"),
        (CalibrateRequest((PUBLISHED,), "x", engine="vllm", gpu="L4"), "no measurements"),
        (CalibrateRequest((Path("/nonexistent/m.csv"),), "x"), "m.csv"),
    ],
)
def test_calibrate_refuses_a_wrong_request_before_the_store(
    request_: CalibrateRequest, message: str
) -> None:
    with pytest.raises(PlannerError, match=message):  # a missing file is an InputFileError
        calibrate(request_, no_store)
