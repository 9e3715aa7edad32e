"""Error bars (planner.latency.uncertainty): hand-computable cases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from planner.errors import UsageError
from planner.latency.uncertainty import (
    ACCURACY_ENV,
    DEFAULT_ERROR,
    DEFAULT_GROUP,
    NO_ACCURACY,
    ErrorChoice,
    ErrorGroup,
    bundled_accuracy,
    gpu_class,
    load_accuracy,
    lower_rank,
    model_interval,
    parse_confidence,
    percentile_interval,
    sizing_factor,
    summary_quantile,
    upper_factor,
    upper_rank,
)

pytestmark = pytest.mark.unit
FIXTURE = Path(__file__).parent.parent / "fixtures" / "accuracy_sample.json"


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("H100-SXM", "H100"),
        ("H100-PCIe", "H100"),
        ("H100-NVL", "H100"),
        ("A100-80GB", "A100"),
        ("A100-40GB", "A100"),
        ("H200", "H200"),
        ("L4", "L4"),
        ("L40S", "L40S"),
        ("MI300X", "MI300X"),
        ("GH200-144GB", "GH200"),
        ("cpu-xeon-emr-2vcpu", "cpu-xeon-emr-2vcpu"),
    ],
)
def test_gpu_class(name: str, family: str) -> None:
    assert gpu_class(name) == family


def test_lookup_falls_back_in_order() -> None:
    acc = load_accuracy(FIXTURE)
    exact = acc.lookup("vllm", "H100-SXM", "ttft")
    assert (exact.group.label, exact.how) == ("vllm/H100/ttft/p99", "exact")
    any_class = acc.lookup("vllm", "L4", "tpot")
    assert (any_class.group.label, any_class.how) == ("vllm/*/tpot/p99", "any GPU class")
    anything = acc.lookup("sglang", "L4", "e2e")
    assert anything.group.label == "*/*/e2e/p99"
    # a P99 with only a P95 group for the class still prefers the P99 of any engine and class
    # (the stat falls back last); with no P99 at all the P95 is used and said so
    no_p99 = load_accuracy(FIXTURE)
    groups = tuple(g for g in no_p99.groups if g.label != "*/*/e2e/p99")
    from planner.latency.uncertainty import Accuracy

    only_p95 = Accuracy("x", groups=groups).lookup("sglang", "A100-40GB", "e2e")
    assert only_p95.group.label == "*/A100/e2e/p95"
    assert only_p95.how == "any engine, p95 for p99"
    missing = acc.lookup("vllm", "A100-80GB", "ttft")
    assert missing.group is DEFAULT_GROUP and missing.how == "no measured group matches"
    assert NO_ACCURACY.lookup("vllm", "H100", "ttft").how == "no accuracy file"


def test_model_interval_from_empirical_quantiles() -> None:
    # errors -0.2 .. 0.3 by 0.05: the 10% quantile is -0.15, the 90% one 0.25
    group = load_accuracy(FIXTURE).lookup("vllm", "H100", "ttft").group
    assert group.quantile(0.1) == pytest.approx(-0.15)
    assert group.quantile(0.9) == pytest.approx(0.25)
    low, high = model_interval(1.0, group, 0.8)
    assert low == pytest.approx(1 / 1.25) and high == pytest.approx(1 / 0.85)
    assert upper_factor(group, 0.9) == pytest.approx(1 / 0.85)
    assert sizing_factor(group, None) == 1.0
    # a model that over-predicts everywhere is not trusted to shrink the fleet
    high_only = ErrorGroup("x", "*", "ttft", "p99", (0.1, 0.2))
    assert upper_factor(high_only, 0.9) < 1 and sizing_factor(high_only, 0.9) == 1.0
    # the default group: +-30%
    assert upper_factor(DEFAULT_GROUP, 0.9) == pytest.approx(1 / (1 - DEFAULT_ERROR))


def test_order_statistic_ranks() -> None:
    # P99 of 300: P(Bin(300, .99) <= 298) = 1 - .99^300 - 3 x .99^299 = 0.80 < 0.9, while
    # P(<= 299) = 1 - .99^300 = 0.951: the upper bound is the slowest request
    assert 1 - 0.99**300 - 300 * 0.01 * 0.99**299 < 0.9 < 1 - 0.99**300
    assert upper_rank(300, 0.99, 0.9) == 300
    # 100 requests: 1 - .99^100 = 0.63 < 0.9: no distribution-free bound
    assert upper_rank(100, 0.99, 0.9) is None
    # 100,000: within a few ranks of the 99,000th (sd = sqrt(n p (1 - p)) = 31.5; z(.9) = 1.28)
    k = upper_rank(100_000, 0.99, 0.9)
    assert k is not None and 99_000 + 30 <= k <= 99_000 + 50
    j = lower_rank(100_000, 0.99, 0.9)
    assert j is not None and 99_000 - 50 <= j <= 99_000 - 30
    # the median of 3 at 75%: X_(3) covers it with 1 - 1/8 = 0.875; X_(2) with 0.5
    assert upper_rank(3, 0.5, 0.75) == 3 and lower_rank(3, 0.5, 0.75) == 1


def test_summary_quantile_interpolates_in_the_tail() -> None:
    # an exponential tail x = -ln(1 - q): exact between and beyond the kept percentiles
    stats = {f"p{int(q * 100)}": -math.log(1 - q) for q in (0.5, 0.9, 0.95, 0.99)}
    stats["max"] = 10.0
    for q in (0.6, 0.97, 0.995):
        assert summary_quantile(stats, q) == pytest.approx(-math.log(1 - q))
    assert summary_quantile(stats, 0.99999) == 10.0  # capped at the maximum
    assert summary_quantile(stats, 1.0) == 10.0


def test_percentile_interval_combines_sampling_and_model_error() -> None:
    choice = load_accuracy(FIXTURE).lookup("vllm", "H100", "ttft")
    stats = {"p50": 0.5, "p90": 0.8, "p95": 0.9, "p99": 1.0, "max": 2.0}

    def quantile(q: float) -> float | None:
        return summary_quantile(stats, q)

    few = percentile_interval(1.0, 0.99, 0.9, choice, requests=300, quantile=quantile)
    many = percentile_interval(1.0, 0.99, 0.9, choice, requests=100_000, quantile=quantile)
    # 300 requests: the upper bound is the maximum over the model's 1 + q(0.1) = 0.85
    assert few.upper == pytest.approx(2.0 / 0.85)
    assert many.upper < 1.05 / 0.85 and many.upper > 1 / 0.85
    assert few.low <= many.low <= 1.0 <= many.high <= few.high
    # without requests only the model's error
    alone = percentile_interval(1.0, 0.99, 0.8, choice)
    assert (alone.low, alone.high) == pytest.approx((1 / 1.25, 1 / 0.85))
    assert alone.to_dict()["group"] == "vllm/H100/ttft/p99"
    default = percentile_interval(1.0, 0.99, 0.9, ErrorChoice(DEFAULT_GROUP, "none", "none"))
    assert default.to_dict()["group"] == "default"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("0.9", 0.9), ("90%", 0.9), ("0", None), ("none", None), (0.95, 0.95), (None, None)],
)
def test_parse_confidence(given: str | float | None, expected: float | None) -> None:
    assert parse_confidence(given) == expected


@pytest.mark.parametrize("bad", ["1", "1.5", "-0.1", "nan", "ninety", "100%"])
def test_parse_confidence_refuses(bad: str) -> None:
    with pytest.raises(UsageError, match="--confidence"):
        parse_confidence(bad)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "accuracy.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "not valid JSON"),
        ({"groups": 3}, "'groups' list"),
        ({"groups": [{"engine": "tgi"}]}, r"groups\[0\]\.engine 'tgi'"),
        (
            {"groups": [{"engine": "vllm", "metric": "ttft", "stat": "p99", "gpu_class": "H100"}]},
            r"groups\[0\]\.errors",
        ),
        (
            {
                "groups": [
                    {
                        "engine": "vllm",
                        "metric": "ttft",
                        "stat": "p99",
                        "gpu_class": "H100",
                        "errors": [0.1, -1.0],
                    }
                ]
            },
            r"errors\[1\] -1\.0",
        ),
    ],
)
def test_malformed_file_named(tmp_path: Path, data: object, message: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(UsageError, match=message) as raised:
        load_accuracy(path)
    assert str(path) in str(raised.value)


def test_missing_bundled_file_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ACCURACY_ENV, raising=False)
    monkeypatch.setenv("PLANNER_DATA_DIR", str(tmp_path))
    assert bundled_accuracy() is NO_ACCURACY
    monkeypatch.setenv(ACCURACY_ENV, str(FIXTURE))
    assert bundled_accuracy().source == str(FIXTURE)
    monkeypatch.setenv(ACCURACY_ENV, str(tmp_path / "nope.json"))
    with pytest.raises(UsageError, match="nope.json"):
        bundled_accuracy()
