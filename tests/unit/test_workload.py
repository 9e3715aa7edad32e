"""Workloads without a store: synthetic arrivals, rate-curve files and windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from numpy.typing import NDArray

from planner.errors import InputFileError, UsageError
from planner.simulate.workload import Workload, limit_prompts, synthetic
from planner.workload.rates import RateCurve, read_rate_curve
from tests.conftest import WriteFile

START = datetime(2024, 6, 1, tzinfo=UTC)


def pool(size: int = 500, seed: int = 7) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Token pairs whose outputs are not a function of position, so a mix-up shows."""
    rng = np.random.default_rng(seed)
    inputs = rng.integers(1, 8000, size, dtype=np.int64)
    outputs = rng.integers(1, 2000, size, dtype=np.int64)
    return inputs, outputs


def flat(per_hour: float, hours: int) -> RateCurve:
    return RateCurve(START, np.full(hours, per_hour))


def hourly_counts(workload: Workload, hours: int) -> NDArray[np.int64]:
    return np.bincount((workload.arrival_s // 3600).astype(np.int64), minlength=hours)


# --- synthetic arrivals ---------------------------------------------------------------------


@pytest.mark.parametrize("cv", [1.0, 2.0])
def test_mean_count_per_hour_follows_the_curve(cv: float) -> None:
    levels = np.array([20.0, 150.0, 900.0])
    hours = 600
    curve = RateCurve(START, np.tile(levels, hours // len(levels)))
    counts = hourly_counts(synthetic(curve, *pool(), seed=3, cv=cv), hours)
    assert len(counts) == hours  # nothing after the curve ends
    for level_index, level in enumerate(levels):
        at_level = counts[level_index :: len(levels)]
        # a count over an hour has variance about cv^2 times its mean
        standard_error = cv * np.sqrt(level / len(at_level))
        assert abs(at_level.mean() - level) < 3 * standard_error, (level, at_level.mean())


def test_arrivals_are_sorted_and_start_at_the_curve_start() -> None:
    curve = RateCurve(START, np.array([100.0, 5.0, 400.0]))
    workload = synthetic(curve, *pool(), seed=1)
    assert workload.start == START
    assert np.all(np.diff(workload.arrival_s) >= 0)
    assert workload.arrival_s[0] >= 0 and workload.duration_s < curve.duration_s


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0])
def test_zero_rate_hours_get_no_arrivals(cv: float) -> None:
    rates = np.array([300.0, 0.0, 0.0, 120.0, 0.0, 50.0, 0.0])
    for seed in range(5):
        counts = hourly_counts(synthetic(RateCurve(START, rates), *pool(), seed=seed, cv=cv), 7)
        assert len(counts) == 7
        assert counts[[1, 2, 4, 6]].tolist() == [0, 0, 0, 0]
        assert (counts[[0, 3, 5]] > 0).all()


def test_arrivals_within_an_hour_are_spread_evenly() -> None:
    workload = synthetic(RateCurve(START, np.array([2000.0, 10.0, 6000.0] * 20)), *pool(), seed=2)
    position = (workload.arrival_s % 3600) / 3600
    n = len(position)
    assert abs((position < 0.5).mean() - 0.5) < 4 * np.sqrt(0.25 / n)
    assert abs((position < 0.1).mean() - 0.1) < 4 * np.sqrt(0.09 / n)


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 3.0])
def test_inter_arrival_coefficient_of_variation(cv: float) -> None:
    workload = synthetic(flat(3600.0, 200), *pool(), seed=11, cv=cv)
    gaps = np.diff(workload.arrival_s)
    measured = gaps.std() / gaps.mean()
    assert abs(measured - cv) < 0.1 * cv, measured
    assert abs(gaps.mean() - 1.0) < 0.01  # the rate is still 1 per second


def test_token_pairs_are_drawn_jointly_from_the_pool() -> None:
    inputs, outputs = pool(300)
    workload = synthetic(flat(5000.0, 4), inputs, outputs, seed=5)
    known = set(zip(inputs.tolist(), outputs.tolist(), strict=True))
    drawn = set(zip(workload.input_tokens.tolist(), workload.output_tokens.tolist(), strict=True))
    assert drawn <= known
    assert len(drawn) > 250  # with replacement from the whole pool, not a few pairs
    assert workload.input_tokens.dtype == np.int64 and workload.output_tokens.dtype == np.int64


def test_zero_output_tokens_count_as_one() -> None:
    workload = synthetic(
        flat(1000.0, 1), np.array([10, 20], dtype=np.int64), np.array([0, 5]), seed=1
    )
    assert set(workload.output_tokens.tolist()) == {1, 5}


def test_same_seed_same_workload_different_seed_different() -> None:
    curve = RateCurve(START, np.array([500.0, 50.0, 800.0]))
    args = (curve, *pool())
    first = synthetic(*args, seed=42, cv=1.5, classes=("a", "b"))
    again = synthetic(*args, seed=42, cv=1.5, classes=("a", "b"))
    other = synthetic(*args, seed=43, cv=1.5, classes=("a", "b"))
    for field in ("arrival_s", "input_tokens", "output_tokens", "class_index"):
        np.testing.assert_array_equal(getattr(first, field), getattr(again, field))
    assert len(first) != len(other) or not np.array_equal(first.arrival_s, other.arrival_s)
    assert not np.array_equal(first.input_tokens[:100], other.input_tokens[:100])


def test_classes_follow_their_weights() -> None:
    n_hours, per_hour = 10, 4000.0
    weighted = synthetic(
        flat(per_hour, n_hours),
        *pool(),
        seed=9,
        classes=("batch", "interactive", "never"),
        class_weights=[1.0, 3.0, 0.0],
    )
    assert weighted.classes == ("batch", "interactive", "never")
    assert weighted.class_index.dtype == np.int16
    shares = np.bincount(weighted.class_index, minlength=3) / len(weighted)
    assert abs(shares[1] - 0.75) < 4 * np.sqrt(0.75 * 0.25 / len(weighted))
    assert shares[2] == 0
    uniform = synthetic(flat(per_hour, n_hours), *pool(), seed=9, classes=("a", "b"))
    assert abs(np.mean(uniform.class_index == 1) - 0.5) < 4 * np.sqrt(0.25 / len(uniform))
    default = synthetic(flat(per_hour, 1), *pool(), seed=9)
    assert default.classes == ("default",) and not default.class_index.any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cv": 0.0}, "--cv"),
        ({"cv": float("nan")}, "--cv"),
        ({"classes": ()}, "no request classes"),
        ({"classes": ("a", "a")}, "repeat"),
        ({"classes": ("a", "b"), "class_weights": [1.0]}, "one weight per class"),
        ({"classes": ("a", "b"), "class_weights": [0.0, 0.0]}, "not all 0"),
        ({"classes": ("a", "b"), "class_weights": [1.0, -1.0]}, "non-negative"),
    ],
)
def test_bad_synthetic_options_are_usage_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        synthetic(flat(10.0, 2), *pool(), **kwargs)  # type: ignore[arg-type]


def test_empty_pool_and_silent_curve_are_usage_errors() -> None:
    empty = np.array([], dtype=np.int64)
    with pytest.raises(UsageError, match="token pool is empty"):
        synthetic(flat(10.0, 2), empty, empty)
    with pytest.raises(UsageError, match="asks for no requests"):
        synthetic(flat(0.0, 3), *pool())


# --- rate curves ----------------------------------------------------------------------------


def test_read_rate_curve(write: WriteFile) -> None:
    path = write(
        "rates.csv",
        "ds,y,yhat_lower\n"
        "2024-06-01 22:00:00,3600,1\n"
        "2024-06-01T23:00:00,0,1\n"
        "2024-06-02 00:00,7200.5,1\n"
        "\n",
    )
    curve = read_rate_curve(path)
    assert curve.start == START + timedelta(hours=22)  # naive is UTC
    assert curve.hours == 3 and curve.duration_s == 3 * 3600
    np.testing.assert_array_equal(curve.requests_per_hour, [3600.0, 0.0, 7200.5])
    assert curve.rate_at(0.0) == 1.0
    assert curve.rate_at(3599.9) == 1.0
    assert curve.rate_at(3600.0) == 0.0
    assert curve.rate_at(2 * 3600 + 1) == pytest.approx(7200.5 / 3600)
    assert curve.rate_at(-1.0) == 0.0 and curve.rate_at(3 * 3600.0) == 0.0
    rates = curve.rate_at(np.array([10.0, 4000.0, 8000.0, 20000.0]))
    np.testing.assert_allclose(rates, [1.0, 0.0, 7200.5 / 3600, 0.0])


def test_rate_curve_times_with_an_offset_become_utc(write: WriteFile) -> None:
    path = write("tz.csv", "y,ds\n5,2024-06-01T02:00:00+02:00\n6,2024-06-01T01:00:00Z\n")
    curve = read_rate_curve(path)
    assert curve.start == START and curve.start.tzinfo == UTC
    np.testing.assert_array_equal(curve.requests_per_hour, [5.0, 6.0])


def test_rate_curve_drives_synthetic(write: WriteFile) -> None:
    path = write(
        "r.csv", "ds,y\n" + "".join(f"2024-06-01T{h:02d}:00,{h * 100}\n" for h in range(24))
    )
    workload = synthetic(read_rate_curve(path), *pool(), seed=4)
    counts = hourly_counts(workload, 24)
    assert counts[0] == 0
    assert abs(counts.sum() - sum(h * 100 for h in range(24))) < 4 * np.sqrt(27600)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("ds,rate\n2024-06-01,1\n", "column 'y': missing column"),
        ("when,y\n2024-06-01,1\n", "column 'ds': missing column"),
        (
            "ds,y\n2024-06-01T00:00,1\nyesterday,2\n",
            "row 2, line 3, column 'ds': 'yesterday' is not a date",
        ),
        ("ds,y\n,1\n", "row 1, line 2, column 'ds': empty"),
        ("ds,y\n2024-06-01T00:00,-3\n", "row 1, line 2, column 'y': '-3': expected a non-negative"),
        ("ds,y\n2024-06-01T00:00,nan\n", "row 1, line 2, column 'y': 'nan'"),
        ("ds,y\n2024-06-01T00:00,inf\n", "column 'y': 'inf'"),
        ("ds,y\n2024-06-01T00:00,\n", "row 1, line 2, column 'y': empty"),
        ("ds,y\n2024-06-01T00:00,many\n", "column 'y': 'many'"),
        (
            "ds,y\n2024-06-01T00:00,1\n2024-06-01T01:00,1\n2024-06-01T04:00,1\n",
            "row 3, line 4, column 'ds': '2024-06-01T04:00' leaves a gap of 2 hours: "
            "expected 2024-06-01T02:00:00+00:00",
        ),
        (
            "ds,y\n2024-06-01T00:00,1\n2024-06-01T00:00,1\n",
            "row 2, line 3, column 'ds': '2024-06-01T00:00' repeats the previous hour",
        ),
        (
            "ds,y\n2024-06-01T00:00,1\n2024-06-01T00:30,1\n",
            "row 2, line 3, column 'ds': '2024-06-01T00:30' is not a whole number of hours",
        ),
        ("ds,y\n2024-06-01T00:00,1,2\n", "row 1, line 2: 3 fields, expected 2"),
        ("ds,y\n\n", "no data rows"),
        ("", "the file is empty"),
    ],
)
def test_bad_rate_curves_name_row_and_column(write: WriteFile, content: str, expected: str) -> None:
    path = write("curve.csv", content)
    with pytest.raises(InputFileError) as caught:
        read_rate_curve(path)
    message = str(caught.value)
    assert message.startswith(str(path))
    assert expected in message


def test_missing_rate_curve_file(write: WriteFile) -> None:
    with pytest.raises(InputFileError, match="file not found"):
        read_rate_curve(write.folder / "nope.csv")


# --- windows --------------------------------------------------------------------------------


def small_workload() -> Workload:
    return Workload(
        start=START,
        arrival_s=np.array([0.0, 5.0, 10.0, 12.5, 19.999, 20.0, 31.0]),
        input_tokens=np.arange(100, 107, dtype=np.int64),
        output_tokens=np.arange(1, 8, dtype=np.int64),
        class_index=np.array([0, 1, 0, 1, 1, 0, 1], dtype=np.int16),
        classes=("batch", "interactive"),
        prefix_blocks=[(i,) for i in range(7)],
    )


def test_window_takes_half_open_range_and_rebases_time() -> None:
    workload = small_workload()
    assert len(workload) == 7 and workload.duration_s == 31.0
    part = workload.window(10.0, 20.0)
    assert len(part) == 3
    np.testing.assert_allclose(part.arrival_s, [0.0, 2.5, 9.999])
    assert part.start == START + timedelta(seconds=10)
    assert part.input_tokens.tolist() == [102, 103, 104]
    assert part.output_tokens.tolist() == [3, 4, 5]
    assert part.class_index.tolist() == [0, 1, 1]
    assert part.classes == ("batch", "interactive")
    assert part.prefix_blocks == [(2,), (3,), (4,)]
    assert part.prefix_block_tokens == workload.prefix_block_tokens
    assert part.duration_s == pytest.approx(9.999)


def test_empty_window_and_empty_workload() -> None:
    part = small_workload().window(40.0, 50.0)
    assert len(part) == 0 and part.duration_s == 0.0
    assert part.start == START + timedelta(seconds=40)
    with pytest.raises(ValueError, match="before its start"):
        small_workload().window(5.0, 1.0)


def test_workload_columns_must_agree_in_length() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        Workload(
            start=START,
            arrival_s=np.array([0.0, 1.0]),
            input_tokens=np.array([1], dtype=np.int64),
            output_tokens=np.array([1, 1], dtype=np.int64),
            class_index=np.zeros(2, dtype=np.int16),
            classes=("default",),
        )


def test_head_keeps_the_first_requests_by_arrival() -> None:
    first = small_workload().head(3)
    assert first.arrival_s.tolist() == [0.0, 5.0, 10.0]
    assert first.input_tokens.tolist() == [100, 101, 102]
    assert first.prefix_blocks == [(0,), (1,), (2,)]
    assert first.start == START
    assert len(small_workload().head(100)) == 7
    with pytest.raises(UsageError, match="at least 1"):
        small_workload().head(0)


def test_truncate_cuts_long_prompts_and_their_prefix_blocks() -> None:
    workload = small_workload()  # prompts 100..106 tokens, one 512-token block each
    limited = limit_prompts(workload, 103, "truncate")
    assert limited.affected == 3 and limited.refused is None
    assert limited.kept.input_tokens.tolist() == [100, 101, 102, 103, 103, 103, 103]
    assert limited.kept.output_tokens.tolist() == workload.output_tokens.tolist()
    # a block of 512 tokens no longer fits a 103-token prompt: the cut prompts lose it
    assert limited.kept.prefix_blocks == [(0,), (1,), (2,), (3,), (), (), ()]


def test_refuse_sets_long_prompts_apart() -> None:
    limited = limit_prompts(small_workload(), 104, "refuse")
    assert limited.affected == 2
    assert limited.kept.input_tokens.tolist() == [100, 101, 102, 103, 104]
    assert limited.refused is not None
    assert limited.refused.input_tokens.tolist() == [105, 106]
    assert limited.refused.arrival_s.tolist() == [20.0, 31.0]


def test_no_limit_and_bad_limits() -> None:
    workload = small_workload()
    assert limit_prompts(workload, None).kept is workload
    assert limit_prompts(workload, 1000).affected == 0
    with pytest.raises(UsageError, match="--over-length 'cut'"):
        limit_prompts(workload, 10, "cut")
    with pytest.raises(UsageError, match="--max-model-len 0"):
        limit_prompts(workload, 0)
