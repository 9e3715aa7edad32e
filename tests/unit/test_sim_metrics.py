from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from planner.errors import UsageError
from planner.simulate.metrics import (
    SLO,
    LogHistogram,
    MetricsCollector,
    RequestChunk,
    RequestWriter,
    Timeline,
    cost,
)

NAN = math.nan


def chunk(rows: list[dict[str, Any]]) -> RequestChunk:
    """A chunk from hand-written rows; unspecified fields take harmless defaults."""
    defaults: dict[str, Any] = {
        "replica": 0,
        "class_index": 0,
        "input_tokens": 100,
        "output_tokens": 11,
        "cached_tokens": 0,
        "preemptions": 0,
        "rejected": False,
        "response_cache_hit": False,
    }
    full = [{**defaults, "request_id": i, **row} for i, row in enumerate(rows)]
    for row in full:
        if row["rejected"]:
            row.update(first_token_s=NAN, finish_s=NAN, replica=-1)
    columns = {
        name: np.array([row[name] for row in full], dtype=dtype)
        for name, dtype in RequestChunk.DTYPES.items()
    }
    return RequestChunk(**columns)


def random_chunk(n: int, seed: int, classes: int = 2) -> RequestChunk:
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 1000, n))
    rejected = rng.random(n) < 0.1
    output = rng.integers(1, 200, n)
    first = np.where(rejected, np.nan, arrival + rng.lognormal(-1, 1, n))
    finish = np.where(rejected, np.nan, first + output * rng.lognormal(-4, 0.5, n))
    return RequestChunk(
        request_id=np.arange(n),
        arrival_s=arrival,
        first_token_s=first,
        finish_s=finish,
        replica=np.where(rejected, -1, rng.integers(0, 8, n)),
        class_index=rng.integers(0, classes, n).astype(np.int16),
        input_tokens=rng.integers(1, 4000, n),
        output_tokens=output,
        cached_tokens=rng.integers(0, 50, n),
        preemptions=rng.integers(0, 3, n).astype(np.int32),
        rejected=rejected,
        response_cache_hit=rng.random(n) < 0.2,
    )


def split(c: RequestChunk, at: int) -> tuple[RequestChunk, RequestChunk]:
    def part(s: slice) -> RequestChunk:
        return RequestChunk(**{name: getattr(c, name)[s] for name in RequestChunk.DTYPES})

    return part(slice(None, at)), part(slice(at, None))


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


# LogHistogram


def test_histogram_quantiles_are_within_0_2_percent_of_numpy_on_a_million_lognormal_values() -> (
    None
):
    values = np.random.default_rng(1).lognormal(mean=-1.0, sigma=1.5, size=1_000_000)
    h = LogHistogram()
    h.add(values)
    assert h.count == 1_000_000
    for q in (0.5, 0.9, 0.99, 0.999):
        exact = float(np.percentile(values, q * 100))
        error = abs(h.quantile(q) - exact) / exact
        assert error <= 0.002
        assert error <= LogHistogram.MAX_RELATIVE_ERROR + 1e-12  # the documented half-bin bound
    assert h.max == values.max() == h.quantile(1.0)
    assert h.quantile(0.0) == values.min()
    assert h.mean == pytest.approx(values.mean(), rel=1e-12)


def test_histogram_bins_are_0_2_percent_wide_over_the_whole_range() -> None:
    assert LogHistogram.RATIO == 1.002
    assert LogHistogram.MAX_RELATIVE_ERROR < 0.0011
    values = np.geomspace(1e-6, 1e6, 200_001)
    index = LogHistogram.bin_index(values)
    assert index.min() == 1 and index.max() == LogHistogram.BINS  # no value falls outside
    represented = np.array([LogHistogram.bin_value(int(i)) for i in index])
    assert np.max(np.abs(represented / values - 1)) <= LogHistogram.MAX_RELATIVE_ERROR + 1e-12
    assert LogHistogram.bin_index(np.array([0.0, -3.0, 5e-7, 2e6, math.inf])).tolist() == [
        0,
        0,
        0,
        LogHistogram.BINS + 1,
        LogHistogram.BINS + 1,
    ]


def test_merge_equals_adding_everything_to_one_histogram() -> None:
    values = np.random.default_rng(2).lognormal(0, 2, 50_000)
    whole, first, second = LogHistogram(), LogHistogram(), LogHistogram()
    whole.add(values)
    first.add(values[:20_000])
    second.add(values[20_000:])
    first.merge(second)
    assert first.count == whole.count == 50_000
    for q in (0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0):
        assert first.quantile(q) == whole.quantile(q)
    assert first.max == whole.max
    assert first.mean == pytest.approx(whole.mean, rel=1e-12)


def test_nan_is_ignored_and_non_positive_values_count_as_zero() -> None:
    h = LogHistogram()
    h.add(np.array([NAN, 0.0, -1.0, 2.0, 4.0, NAN]))
    assert h.count == 4
    assert h.mean == 6.0 / 4  # -1 counts as 0
    assert h.max == 4.0
    assert h.quantile(0.0) == 0.0
    assert h.quantile(1 / 3) == 0.0  # rank 1 of [0, 0, 2, 4]
    # rank 1.5: halfway between 0 and the bin of 2
    assert h.quantile(0.5) == pytest.approx(1.0, rel=LogHistogram.MAX_RELATIVE_ERROR)
    assert h.quantile(1.0) == 4.0


def test_empty_histogram_and_out_of_range_quantile() -> None:
    h = LogHistogram()
    h.add(np.array([NAN]))
    assert h.count == 0
    assert math.isnan(h.quantile(0.5)) and math.isnan(h.mean) and math.isnan(h.max)
    assert h.stats() == dict.fromkeys(("p50", "p90", "p95", "p99", "max", "mean"))
    with pytest.raises(ValueError, match="outside"):
        h.quantile(1.5)


def test_overflow_values_are_reported_as_the_exact_maximum() -> None:
    h = LogHistogram()
    h.add(np.array([3e6, 5e6]))
    assert h.quantile(0.0) == 3e6
    assert h.quantile(0.5) == 5e6  # both in overflow, which stands for the maximum
    assert h.quantile(1.0) == 5e6


# RequestChunk and SLO


def test_chunk_derives_latencies() -> None:
    c = chunk(
        [
            {"arrival_s": 1.0, "first_token_s": 1.5, "finish_s": 3.5, "output_tokens": 5},
            {"arrival_s": 2.0, "first_token_s": 2.25, "finish_s": 2.25, "output_tokens": 1},
            {"arrival_s": 3.0, "rejected": True},
        ]
    )
    assert len(c) == 3
    assert c.class_index.dtype == np.int16 and c.replica.dtype == np.int32
    np.testing.assert_array_equal(c.ttft_s, [0.5, 0.25, NAN])
    np.testing.assert_array_equal(c.tpot_s, [0.5, NAN, NAN])
    np.testing.assert_array_equal(c.e2e_s, [2.5, 0.25, NAN])


def test_chunk_columns_must_have_one_length() -> None:
    columns: dict[str, Any] = {name: [0, 0] for name in RequestChunk.DTYPES}
    columns["finish_s"] = [0.0]
    with pytest.raises(ValueError, match="differ in length"):
        RequestChunk(**columns)


def test_slo_met_by_hand() -> None:
    c = chunk(
        [
            # ttft 0.5, tpot 0.1, e2e 1.5: meets everything (ttft and e2e exactly on target)
            {"arrival_s": 0.0, "first_token_s": 0.5, "finish_s": 1.5},
            {"arrival_s": 0.0, "first_token_s": 0.6, "finish_s": 1.0},  # ttft too slow
            {"arrival_s": 0.0, "first_token_s": 0.1, "finish_s": 1.4},  # tpot 0.13 too slow
            # one output token: tpot undefined, not checked
            {"arrival_s": 0.0, "first_token_s": 0.2, "finish_s": 0.2, "output_tokens": 1},
            {"arrival_s": 0.0, "first_token_s": 0.5, "finish_s": 1.6},  # e2e too slow
            {"arrival_s": 0.0, "rejected": True},
        ]
    )
    slo = SLO(ttft_s=0.5, tpot_s=0.12, e2e_s=1.5)
    assert slo.met(c).tolist() == [True, False, False, True, False, False]
    assert SLO().met(c).tolist() == [True] * 5 + [False]
    assert SLO(tpot_s=0.12).met(c).tolist() == [True, True, False, True, True, False]


def test_slo_targets_must_be_positive() -> None:
    with pytest.raises(UsageError, match="ttft_s"):
        SLO(ttft_s=0)


# MetricsCollector


def hand_chunk() -> RequestChunk:
    return chunk(
        [
            {"arrival_s": 10.0, "first_token_s": 10.5, "finish_s": 11.5, "input_tokens": 200,
             "cached_tokens": 50, "preemptions": 1},
            {"arrival_s": 12.0, "first_token_s": 14.0, "finish_s": 15.0, "input_tokens": 300},
            {"arrival_s": 13.0, "rejected": True, "input_tokens": 1000, "output_tokens": 50},
            {"arrival_s": 14.0, "first_token_s": 14.0, "finish_s": 14.0, "output_tokens": 1,
             "class_index": 1, "response_cache_hit": True, "cached_tokens": 100},
            {"arrival_s": 15.0, "first_token_s": 15.5, "finish_s": 30.0, "class_index": 1,
             "preemptions": 2},
        ]
    )  # fmt: skip


def test_collector_summary_by_hand() -> None:
    collector = MetricsCollector(("chat", "batch"), {"chat": SLO(ttft_s=1.0)})
    collector.add(hand_chunk())
    s = collector.summary()
    assert s["duration_s"] == 20.0  # last finish 30 - first arrival 10
    assert s["first_arrival_s"] == 10.0 and s["last_finish_s"] == 30.0
    chat, batch, total = s["classes"]["chat"], s["classes"]["batch"], s["all"]
    assert (chat["requests"], chat["finished"], chat["rejected"]) == (3, 2, 1)
    assert (batch["requests"], batch["finished"], batch["rejected"]) == (2, 2, 0)
    assert (total["requests"], total["finished"], total["rejected"]) == (5, 4, 1)
    assert chat["slo_met"] == 1  # the second request's ttft is 2 s
    assert chat["slo_attainment"] == 1 / 3
    assert batch["slo_attainment"] is None  # no targets: n/a, not 100%
    assert batch["goodput_rps"] is None and batch["slo_met"] == 2
    assert total["slo_attainment"] == 3 / 5
    assert total["goodput_rps"] == 3 / 20
    assert total["throughput_rps"] == 4 / 20
    assert chat["input_tokens"] == 500  # the rejected request's tokens are not counted
    assert chat["output_tokens"] == 22
    assert total["output_tokens_per_s"] == (11 + 11 + 1 + 11) / 20
    assert total["input_tokens_per_s"] == 700 / 20
    assert total["cached_prompt_share"] == 150 / 700
    assert total["response_cache_hits"] == 1 and chat["response_cache_hits"] == 0
    assert total["preemptions"] == 3 and batch["preemptions"] == 2
    assert chat["ttft"]["max"] == 2.0
    assert chat["ttft"]["mean"] == 1.25
    assert chat["ttft"]["p50"] == pytest.approx(1.25, rel=0.002)  # halfway between 0.5 and 2
    assert batch["tpot"]["max"] == 14.5 / 10 and batch["tpot"]["mean"] == 14.5 / 10
    assert batch["e2e"]["max"] == 15.0
    assert total["e2e"]["max"] == 15.0
    assert s["classes"]["chat"]["tpot"]["p99"] == pytest.approx(0.1, rel=0.002)


def test_collector_rates_follow_the_given_duration() -> None:
    collector = MetricsCollector(("chat", "batch"), {"chat": SLO(ttft_s=1.0)})
    collector.add(hand_chunk())
    s = collector.summary(duration_s=100.0)
    assert s["duration_s"] == 100.0
    assert s["all"]["goodput_rps"] == 0.03
    assert s["classes"]["batch"]["throughput_rps"] == 0.02
    with pytest.raises(UsageError, match="duration"):
        collector.summary(duration_s=0)


def test_no_slo_target_means_no_attainment() -> None:
    """Without any target, attainment and goodput are unknown (None), not 100%."""
    collector = MetricsCollector(("chat", "batch"), {"batch": SLO()})
    collector.add(hand_chunk())
    s = collector.summary()
    for stats in (s["all"], s["classes"]["chat"], s["classes"]["batch"]):
        assert stats["slo_attainment"] is None and stats["goodput_rps"] is None
    assert s["all"]["throughput_rps"] == 4 / 20


def test_empty_collector_summary_has_no_rates() -> None:
    s = MetricsCollector(("chat",), {}).summary()
    assert s["duration_s"] is None
    assert s["all"]["requests"] == 0
    assert s["all"]["goodput_rps"] is None and s["all"]["slo_attainment"] is None
    assert s["all"]["ttft"]["p50"] is None


def test_two_chunks_summarize_like_one() -> None:
    whole = random_chunk(20_000, seed=3, classes=3)
    slos = {"a": SLO(ttft_s=0.5), "b": SLO(tpot_s=0.02, e2e_s=5.0)}
    one, two = MetricsCollector(("a", "b", "c"), slos), MetricsCollector(("a", "b", "c"), slos)
    one.add(whole)
    for part in split(whole, 7_000):
        two.add(part)
    expected, got = flatten(one.summary()), flatten(two.summary())
    assert got.keys() == expected.keys()
    assert expected["all.requests"] == 20_000 and 0 < expected["all.slo_met"] < 20_000
    for key, value in expected.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert got[key] == value, key


def test_collector_checks_classes() -> None:
    with pytest.raises(UsageError, match="'x'"):
        MetricsCollector(("a",), {"x": SLO()})
    with pytest.raises(UsageError, match="twice"):
        MetricsCollector(("a", "a"), {})
    with pytest.raises(ValueError, match="class_index 2"):
        MetricsCollector(("a", "b"), {}).add(random_chunk(10, seed=4, classes=3))


# Timeline


def test_timeline_integrates_a_step_sequence() -> None:
    timeline = Timeline()  # 60 s buckets
    timeline.record(0.0, 2, 1, 5, 2, {"on_demand": 2})
    timeline.record(1800.0, 4, 4, 0, 8, {"on_demand": 2, "spot": 2})
    timeline.advance_to(3600.0)
    assert timeline.gpu_hours(8) == {"on_demand": 2 * 8.0, "spot": 0.5 * 2 * 8}
    assert sum(timeline.replica_seconds().values()) / 3600 == 3.0  # 3 replica-hours
    frame = timeline.to_frame()
    assert list(frame.columns) == [
        "t_s", "replicas_up", "busy_replicas", "queued", "running", "utilization", "on_demand",
        "spot",
    ]  # fmt: skip
    assert len(frame) == 60
    assert frame["t_s"].tolist() == [60.0 * i for i in range(60)]
    assert frame["replicas_up"].tolist() == [2.0] * 30 + [4.0] * 30
    assert frame["utilization"].tolist() == [0.5] * 30 + [1.0] * 30
    assert frame["queued"].tolist() == [5.0] * 30 + [0.0] * 30
    assert frame["spot"].tolist() == [0.0] * 30 + [2.0] * 30


def test_timeline_buckets_hold_time_weighted_means() -> None:
    timeline = Timeline(resolution_s=60)
    timeline.record(0, 1, 0, 0, 0, {"a": 1})
    timeline.record(30, 3, 3, 0, 0, {"a": 3})  # bucket 0: 1 for 30 s, 3 for 30 s
    for t in range(31, 75):  # many events with an unchanged state
        timeline.record(t, 3, 3, 0, 0, {"a": 3})
    timeline.record(75, 5, 0, 0, 0, {"a": 5})  # bucket 1: 3 for 15 s, then 5
    timeline.advance_to(90)  # bucket 1 is half covered
    frame = timeline.to_frame()
    assert frame["t_s"].tolist() == [0.0, 60.0]
    assert frame["replicas_up"].tolist() == [2.0, (3 * 15 + 5 * 15) / 30]
    assert frame["busy_replicas"].tolist() == [1.5, 1.5]
    assert frame["utilization"].tolist() == [0.75, 45 / 120]
    assert frame["a"].tolist() == frame["replicas_up"].tolist()
    assert timeline.replica_seconds() == {"a": 30 + 3 * 45 + 5 * 15}


def test_timeline_memory_follows_buckets_not_events() -> None:
    timeline = Timeline(resolution_s=60)
    for t in np.linspace(0, 600, 100_001):
        timeline.record(float(t), 1, 1, 0, 1, {"a": 1})
    assert len(timeline.to_frame()) == 10


def test_timeline_spreads_a_long_interval_over_its_buckets() -> None:
    timeline = Timeline(resolution_s=100)
    timeline.record(250, 2, 0, 0, 0, {})
    timeline.advance_to(610)
    frame = timeline.to_frame()
    assert frame["t_s"].tolist() == [200.0, 300.0, 400.0, 500.0, 600.0]
    assert frame["replicas_up"].tolist() == [2.0] * 5


def test_timeline_without_elapsed_time_has_no_rows() -> None:
    timeline = Timeline()
    timeline.record(5, 2, 0, 0, 0, {"a": 2})
    frame = timeline.to_frame()
    assert len(frame) == 0
    assert list(frame.columns) == [
        "t_s", "replicas_up", "busy_replicas", "queued", "running", "utilization", "a",
    ]  # fmt: skip
    assert timeline.gpu_hours(4) == {"a": 0.0}


def test_timeline_rejects_time_going_back_and_reserved_names() -> None:
    timeline = Timeline()
    timeline.record(10, 1, 0, 0, 0, {})
    with pytest.raises(ValueError, match="before"):
        timeline.record(5, 1, 0, 0, 0, {})
    with pytest.raises(UsageError, match="'queued'"):
        timeline.record(20, 1, 0, 0, 0, {"queued": 1})


# cost


def test_cost_per_class_and_total() -> None:
    result = cost({"on_demand": 10.0, "spot": 4.0}, {"on_demand": 3.0, "spot": 1.25, "x": 9.0})
    assert result["total"] == 35.0
    assert result["by_purchase"]["spot"] == {
        "gpu_hours": 4.0,
        "price_per_gpu_hour": 1.25,
        "cost": 5.0,
    }
    assert result["by_purchase"].keys() == {"on_demand", "spot"}


def test_cost_names_a_purchase_class_without_price() -> None:
    with pytest.raises(UsageError, match="'reserved'"):
        cost({"on_demand": 1.0, "reserved": 2.0}, {"on_demand": 3.0})


# RequestWriter


def expected_frame(chunks: list[RequestChunk], classes: tuple[str, ...]) -> pd.DataFrame:
    parts = []
    for c in chunks:
        columns: dict[str, Any] = {name: getattr(c, name) for name in RequestChunk.DTYPES}
        columns.update(ttft_s=c.ttft_s, tpot_s=c.tpot_s, e2e_s=c.e2e_s)
        columns["class"] = np.asarray(classes, dtype=object)[c.class_index]
        parts.append(pd.DataFrame(columns))
    return pd.concat(parts, ignore_index=True)


def read_back(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pandas()
    if path.suffix == ".csv":
        return pa_csv.read_csv(path).to_pandas()
    return pd.read_json(path, lines=True)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_writer_round_trips(tmp_path: Path, suffix: str) -> None:
    classes = ("chat", "batch")
    chunks = list(split(random_chunk(1_000, seed=5), 400))
    path = tmp_path / f"requests{suffix}"
    with RequestWriter(path, classes) as writer:
        for c in chunks:
            writer.write(c)
        assert not path.exists()  # only the temporary file exists until the end
    assert writer.rows == 1_000
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    got = read_back(path)
    expected = expected_frame(chunks, classes)
    assert list(got.columns) == list(expected.columns)
    got["class"] = got["class"].astype(object)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, rtol=1e-14)
    assert got["rejected"].sum() == expected["rejected"].sum() > 0
    assert got["tpot_s"].isna().sum() == expected["tpot_s"].isna().sum() > 0


def test_parquet_has_one_row_group_per_chunk_and_exact_types(tmp_path: Path) -> None:
    path = tmp_path / "requests.parquet"
    chunks = list(split(random_chunk(1_000, seed=6), 300))
    with RequestWriter(path, ("chat", "batch")) as writer:
        for c in chunks:
            writer.write(c)
    file = pq.ParquetFile(path)
    assert file.metadata.num_row_groups == 2
    schema = file.schema_arrow
    assert str(schema.field("class_index").type) == "int16"
    assert str(schema.field("replica").type) == "int32"
    assert str(schema.field("rejected").type) == "bool"


def test_writer_with_no_chunks_writes_the_header(tmp_path: Path) -> None:
    path = tmp_path / "requests.csv"
    with RequestWriter(path, ("chat",)):
        pass
    assert path.read_text().splitlines()[0].startswith('"request_id","arrival_s"')


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_failed_run_leaves_no_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"requests{suffix}"
    with pytest.raises(RuntimeError, match="boom"), RequestWriter(path, ("chat", "batch")) as w:
        w.write(random_chunk(100, seed=7))
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_failed_run_keeps_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), RequestWriter(path, ("chat", "batch")) as w:
        w.write(random_chunk(10, seed=8))
        raise RuntimeError("boom")
    assert path.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [path]


def test_unknown_suffix_lists_the_supported_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"'\.xlsx'.*\.parquet, \.csv, \.jsonl"):
        RequestWriter(tmp_path / "requests.xlsx", ("chat",))
