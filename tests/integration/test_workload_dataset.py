"""Workloads from stored datasets (SQLite, and PostgreSQL when configured) and the real traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from planner.errors import NotFoundError, UsageError
from planner.ingest import IngestOptions, TimeKind, TimeSpec, TimeUnit, ingest_file
from planner.simulate.workload import Workload, synthetic
from planner.store import Store
from planner.store.queries import get_dataset
from planner.store.requests import request_frame
from planner.usecases.load import from_dataset, token_pool
from planner.workload.rates import RateCurve
from tests.conftest import AZURE_CONV, AZURE_CONV_NAME, MOONCAKE, WriteFile

START = datetime(2024, 6, 1, tzinfo=UTC)
CONV = AZURE_CONV_NAME


def load(store: Store, name: str = CONV, **options: object) -> Workload:
    with store.session() as session:
        return from_dataset(session, name, **options)  # type: ignore[arg-type]


def frame(store: Store, name: str = CONV) -> pd.DataFrame:
    with store.session() as session:
        return request_frame(session, get_dataset(session, name).id)


@pytest.fixture
def conv(store: Store) -> pd.DataFrame:
    """The Azure conversation trace, ingested; its requests as stored."""
    ingest_file(store, AZURE_CONV)
    return frame(store)


def test_replay_is_exact(store: Store, conv: pd.DataFrame) -> None:
    workload = load(store)
    first_us = int(conv["arrival_us"].iloc[0])
    assert len(workload) == len(conv) == 19366
    assert workload.arrival_s[0] == 0.0
    assert workload.start == datetime.fromtimestamp(0, UTC) + timedelta(microseconds=first_us)
    np.testing.assert_array_equal(workload.arrival_s, (conv["arrival_us"] - first_us) / 1e6)
    assert workload.input_tokens.sum() == conv["input_tokens"].sum()
    assert workload.output_tokens.sum() == conv["output_tokens"].clip(lower=1).sum()
    assert workload.output_tokens.min() >= 1
    assert workload.classes == ("default",) and not workload.class_index.any()
    assert workload.prefix_blocks is None
    assert workload.duration_s == pytest.approx((conv["arrival_us"].iloc[-1] - first_us) / 1e6)


@pytest.mark.parametrize("scale", [2.0, 0.5, 1.5, 3.0])
def test_load_scale_scales_the_count_over_the_same_span(
    store: Store, conv: pd.DataFrame, scale: float
) -> None:
    n = len(conv)
    span_s = (conv["arrival_us"].iloc[-1] - conv["arrival_us"].iloc[0]) / 1e6
    mean_gap_s = span_s / (n - 1)
    workload = load(store, load_scale=scale, seed=1)
    assert abs(len(workload) - scale * n) < 0.02 * scale * n
    assert np.all(np.diff(workload.arrival_s) >= 0)
    assert workload.arrival_s[0] >= 0
    assert 0.98 * span_s < workload.duration_s < span_s + mean_gap_s
    # the same requests, in their proportions: mean lengths stay within a few percent
    assert workload.input_tokens.mean() == pytest.approx(conv["input_tokens"].mean(), rel=0.05)


def test_doubling_replays_every_request_twice_with_shifted_copies(
    store: Store, conv: pd.DataFrame
) -> None:
    workload = load(store, load_scale=2.0, seed=3)
    assert len(workload) == 2 * len(conv)
    np.testing.assert_array_equal(
        np.sort(workload.input_tokens), np.sort(np.repeat(conv["input_tokens"].to_numpy(), 2))
    )
    original = (conv["arrival_us"] - conv["arrival_us"].iloc[0]).to_numpy() / 1e6
    # the originals are all there; the copies are not on top of them
    assert np.isin(original, workload.arrival_s).all()
    assert len(np.unique(workload.arrival_s)) > 1.9 * len(conv)


def test_load_scale_is_seeded(store: Store, conv: pd.DataFrame) -> None:
    first = load(store, load_scale=1.3, seed=5)
    again = load(store, load_scale=1.3, seed=5)
    other = load(store, load_scale=1.3, seed=6)
    np.testing.assert_array_equal(first.arrival_s, again.arrival_s)
    np.testing.assert_array_equal(first.input_tokens, again.input_tokens)
    assert len(first) != len(other) or not np.array_equal(first.arrival_s, other.arrival_s)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_load_scale_is_a_usage_error(store: Store, conv: pd.DataFrame, scale: float) -> None:
    with pytest.raises(UsageError, match="--load-scale"):
        load(store, load_scale=scale)


def test_window_selects_and_rebases(store: Store, conv: pd.DataFrame) -> None:
    whole = load(store)
    begin = whole.start + timedelta(minutes=10)
    end = whole.start + timedelta(minutes=20)
    workload = load(store, start=begin, end=end)
    begin_us = int((begin - datetime.fromtimestamp(0, UTC)) / timedelta(microseconds=1))
    end_us = begin_us + 600_000_000
    inside = conv[(conv["arrival_us"] >= begin_us) & (conv["arrival_us"] < end_us)]
    assert 0 < len(workload) == len(inside) < len(conv)
    assert workload.start == begin
    assert workload.arrival_s.min() >= 0 and workload.arrival_s.max() < 600
    np.testing.assert_array_equal(workload.arrival_s, (inside["arrival_us"] - begin_us) / 1e6)
    assert workload.input_tokens.tolist() == inside["input_tokens"].tolist()
    # the same requests as cutting the whole replay
    cut = whole.window(600.0, 1200.0)
    assert len(cut) == len(workload)
    np.testing.assert_allclose(cut.arrival_s, workload.arrival_s, atol=1e-6)


def test_open_ended_windows(store: Store, conv: pd.DataFrame) -> None:
    whole = load(store)
    middle = whole.start + timedelta(minutes=30)
    late = load(store, start=middle)
    early = load(store, end=middle)
    assert len(late) + len(early) == len(whole)
    assert early.start == whole.start and early.arrival_s[0] == 0.0
    assert late.start == middle


def test_empty_window_is_a_usage_error(store: Store, conv: pd.DataFrame) -> None:
    with pytest.raises(UsageError, match="has no requests in the window"):
        load(store, start=datetime(2030, 1, 1, tzinfo=UTC), end=datetime(2030, 1, 2, tzinfo=UTC))


def test_window_times_need_a_time_zone_and_an_order(store: Store, conv: pd.DataFrame) -> None:
    with pytest.raises(UsageError, match="has no time zone"):
        load(store, start=datetime(2023, 11, 16))
    with pytest.raises(UsageError, match="not after its start"):
        load(store, start=START, end=START)


def test_unknown_dataset(store: Store, conv: pd.DataFrame) -> None:
    with pytest.raises(NotFoundError, match="no dataset named"):
        load(store, "AzureLLMInferenceTrace_conv")


def test_mooncake_prefix_blocks(store: Store) -> None:
    result = ingest_file(store, MOONCAKE, IngestOptions(start=START))
    workload = load(store, result.dataset)
    assert len(workload) == 12031
    assert workload.start == START
    assert workload.prefix_blocks is not None and len(workload.prefix_blocks) == 12031
    assert workload.prefix_blocks[0] == tuple(range(14))
    assert workload.prefix_block_tokens == 512
    # one 512-token block id per started block of the prompt, for nearly every request
    blocks = np.array([len(b) for b in workload.prefix_blocks])
    assert np.mean(blocks == np.ceil(workload.input_tokens / 512)) > 0.99
    # scaling carries each request's blocks with it
    doubled = load(store, result.dataset, load_scale=2.0)
    assert doubled.prefix_blocks is not None
    assert sorted(doubled.prefix_blocks) == sorted(workload.prefix_blocks * 2)


def test_priority_classes_become_sorted_classes(store: Store, write: WriteFile) -> None:
    path = write(
        "gateway.csv",
        "ts,prompt,completion,tier\n"
        "1717200000,100,20,interactive\n"
        "1717200001,50,0,batch\n"
        "1717200002,70,7,\n"
        "1717200003,80,8,interactive\n",
    )
    mapping = {
        "arrival": "ts",
        "input_tokens": "prompt",
        "output_tokens": "completion",
        "priority_class": "tier",
    }
    options = IngestOptions(
        format="generic", mapping=mapping, time=TimeSpec(TimeKind.EPOCH, TimeUnit.S)
    )
    ingest_file(store, path, options)
    workload = load(store, "gateway")
    assert workload.classes == ("batch", "default", "interactive")
    assert [workload.classes[i] for i in workload.class_index] == [
        "interactive",
        "batch",
        "default",
        "interactive",
    ]
    assert workload.class_index.dtype == np.int16
    assert workload.output_tokens.tolist() == [20, 1, 7, 8]  # 0 output tokens count as 1
    np.testing.assert_array_equal(workload.arrival_s, [0.0, 1.0, 2.0, 3.0])


def test_synthetic_from_a_real_token_pool(store: Store, conv: pd.DataFrame) -> None:
    with store.session() as session:
        inputs, outputs = token_pool(session, CONV)
    assert inputs.dtype == np.int64 and outputs.dtype == np.int64
    assert inputs.tolist() == conv["input_tokens"].tolist()
    assert outputs.tolist() == conv["output_tokens"].tolist()
    curve = RateCurve(START, np.full(24, 10_000.0))
    workload = synthetic(curve, inputs, outputs, seed=8)
    known = set(zip(inputs.tolist(), np.maximum(outputs, 1).tolist(), strict=True))
    drawn = zip(workload.input_tokens.tolist(), workload.output_tokens.tolist(), strict=True)
    assert set(drawn) <= known
    # the pool's correlation between input and output lengths survives
    pool_corr = np.corrcoef(inputs, outputs)[0, 1]
    drawn_corr = np.corrcoef(workload.input_tokens, workload.output_tokens)[0, 1]
    assert drawn_corr == pytest.approx(pool_corr, abs=0.02)
