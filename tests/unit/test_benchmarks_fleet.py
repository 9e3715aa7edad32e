"""The fleet benchmarks' inputs: ``benchmarks/melange.py`` (Mélange's setting: its published
figures as read, the synthetic lengths) and ``benchmarks/fleet_bench.py`` (the 3-model log).
The runs themselves are benchmarks, not tests; these check what they are built on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


melange = _load("melange")
fleet_bench = _load("fleet_bench")

# Mélange's own summary of the same figures (arXiv:2404.14527 and its blog): the cost reduction
# against the single-GPU-type fleets, lowest and highest, per dataset and TPOT target
PUBLISHED_RANGES = {
    ("short", 0.120): (15, 77),
    ("short", 0.040): (9, 68),
    ("long", 0.120): (15, 33),
    ("long", 0.040): (2, 22),
    ("mixed", 0.120): (13, 51),
    ("mixed", 0.040): (4, 51),
}


@pytest.mark.parametrize("key", sorted(PUBLISHED_RANGES))
def test_the_figures_as_read_give_melanges_own_ranges(key: tuple[str, float]) -> None:
    """The bar heights read off the figures reproduce the reductions Mélange states (within a
    point: the bars are read to +-0.03), leaving out the bars equal to Mélange's own cost."""
    ratios = np.array([r for row in melange.PUBLISHED[key].values() for r in row])
    savings = 100 * (1 - 1 / ratios[ratios > 1.005])
    low, high = PUBLISHED_RANGES[key]
    assert abs(savings.min() - low) <= 1.0
    assert abs(savings.max() - high) <= 1.0


def test_the_saving_against_the_best_type_takes_the_cheapest_bar() -> None:
    # short requests, 120 ms, 1 req/s: A10G at 1.17x Mélange is the cheapest single type
    assert melange.published_saving("short", 0.120, 1.0) == pytest.approx(1 - 1 / 1.17)
    # long documents, 40 ms, 1 req/s: A100 alone is what Mélange chose
    assert melange.published_saving("long", 0.040, 1.0) == pytest.approx(0.0)


def test_the_lengths_follow_the_published_statistics() -> None:
    short_in, short_out = melange.lengths("short")
    assert short_in.mean() == pytest.approx(69.5, rel=0.05)  # LMSYS-Chat-1M's prompt mean
    assert short_out.mean() == pytest.approx(214.5, rel=0.05)
    long_in, long_out = melange.lengths("long")
    assert (long_in + long_out <= melange.CONTEXT).all()  # within Llama-2's context
    assert np.median(long_in) > 2500  # documents, most cut near the context
    mixed_in, _ = melange.lengths("mixed")
    assert (mixed_in > 1000).mean() == pytest.approx(0.2, abs=0.01)  # 80% Arena, 20% PubMed


def test_the_prices_are_melanges_per_gpu_hour() -> None:
    by_gpu = {p.gpu_model: p for p in melange.prices()}
    assert set(by_gpu) == {"L4", "A10G", "A100-80GB", "H100-SXM"}
    assert all(p.gpu_count == 1 for p in by_gpu.values())
    # the H100's price over a $1.71 mix (L4 + A10G) is the 4.4x the 1 req/s figure shows
    mix = by_gpu["L4"].usd_per_hour + by_gpu["A10G"].usd_per_hour
    assert by_gpu["H100-SXM"].usd_per_hour / mix == pytest.approx(4.40, abs=0.01)


def test_a_rejected_mix_is_read_from_its_reason() -> None:
    how = "the mixed pools cost $1,248/month once verified, not less than one pool ($737): kept"
    assert melange._rejected_mix(how) == pytest.approx(1248 / 730)
    assert melange._rejected_mix("the cheapest assignment puts every size on one") is None


def test_the_three_model_log_has_its_shares_and_its_day(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    per_model = fleet_bench.write_log(path, 20_000)
    log = pd.read_csv(path)
    assert len(log) == 20_000 and sum(per_model.values()) == 20_000
    shares = log["model"].value_counts(normalize=True)
    for model, share in fleet_bench.MODELS.items():
        assert shares[model] == pytest.approx(share, abs=0.02)
    hours = pd.to_datetime(log["arrival"]).dt.hour.value_counts()
    assert hours[16] / hours[4] == pytest.approx(3.0, rel=0.15)  # peak at 16:00, trough 04:00
    assert ((log["input_tokens"] >= 1) & (log["output_tokens"] >= 1)).all()


def test_each_model_s_time_runs_from_its_screen_to_the_next() -> None:
    events = [
        (0.5, "screen", 100, 900),
        (4.0, "screen", 900, 900),
        (6.0, "verify (round 1, attempt 1)", 0, 4),
        (9.0, "screen", 100, 700),  # the second model's screen
        (12.0, "verify (round 1, attempt 1)", 0, 3),
    ]
    assert fleet_bench.model_spans(events, 15.0) == [pytest.approx(9.0), pytest.approx(6.0)]
    assert fleet_bench.stage_seconds(events)["screen"] == pytest.approx(0.5 + 3.5 + 3.0)
