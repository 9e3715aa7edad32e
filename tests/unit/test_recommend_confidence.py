"""``recommend --confidence``: the fleet sized so the P99 targets hold at the upper end of the
prediction's interval (planner.recommend.margin), on a small synthetic demand priced by hand
(tests/integration/test_recommend_engine.py's)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.latency.uncertainty import Accuracy, ErrorGroup, load_accuracy
from planner.recommend.engine import recommend
from planner.recommend.inputs import Request, SearchOptions
from planner.recommend.margin import Margin
from planner.simulate.metrics import SLO
from tests.integration.test_recommend_engine import A10G, H100, request

# a model that under-predicts by 0-30% (and over-predicts by up to 10%), every engine and GPU
ERRORS = tuple(float(e) for e in np.linspace(-0.3, 0.1, 21))
SPREAD = Accuracy(
    "test", groups=tuple(ErrorGroup("*", "*", m, "p99", ERRORS) for m in ("ttft", "tpot", "e2e"))
)
SLO_ = SLO(ttft_s=2.0, tpot_s=0.08)
OPTIONS = SearchOptions(verify_top=2, growth_check=False, workers=1, tighten_steps=1)


def run(confidence: float | None, accuracy: Accuracy = SPREAD) -> dict[str, Any]:
    req = request(SLO_, options=replace(OPTIONS, confidence=confidence))
    return recommend(replace(req, accuracy=accuracy), [A10G, H100]).to_dict()


def timeless(value: Any) -> Any:
    """``value`` without the wall-clock times (which differ run to run)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not k.endswith("wall_s")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


@pytest.fixture(scope="module")
def runs() -> dict[float | None, dict[str, Any]]:
    return {c: run(c) for c in (None, 0.5, 0.9, 0.99)}


def test_higher_confidence_never_cheaper(runs: dict[float | None, dict[str, Any]]) -> None:
    costs = [runs[c]["winner"]["monthly_usd"] for c in (None, 0.5, 0.9, 0.99)]
    assert costs == sorted(costs)
    assert costs[-1] > costs[0]  # a 30% under-prediction costs replicas


def test_no_confidence_is_the_point_estimate_recommendation(
    runs: dict[float | None, dict[str, Any]],
) -> None:
    off = runs[None]
    # no margin, whatever the accuracy file says: as the search without one
    plain = recommend(request(SLO_, options=OPTIONS), [A10G, H100]).to_dict()
    for key in ("winner", "ranked", "plan"):
        assert timeless(off[key]) == timeless(plain[key])
    conf = off["confidence"]
    assert conf["level"] is None and conf["margin_usd_per_month"] == 0.0
    assert conf["point_estimate_fleet"]["monthly_usd"] == off["winner"]["monthly_usd"]
    assert off["winner"]["p99_upper_s"] is None
    assert conf["targets"]["ttft"]["screen_target_s"] == 2.0


def test_margin_states_bounds_groups_and_cost(runs: dict[float | None, dict[str, Any]]) -> None:
    data = runs[0.9]
    conf = data["confidence"]
    winner = data["winner"]
    assert conf["level"] == 0.9 and conf["accuracy_file"] == "test"
    ttft = conf["targets"]["ttft"]
    # q(0.1) of -0.30 .. 0.10 by 0.02 is -0.26: targets shrink by 0.74
    assert ttft["model_factor"] == pytest.approx(1 / 0.74)
    assert ttft["screen_target_s"] == pytest.approx(2.0 * 0.74)
    assert ttft["error_group"]["group"] == "*/*/ttft/p99"
    for metric, target in (("ttft", 2.0), ("tpot", 0.08)):
        row = conf["targets"][metric]
        assert row["point_p99_s"] == winner[f"p99_{metric}_s"]
        assert row["point_p99_s"] * row["model_factor"] <= row["upper_s"] <= target
    base = conf["point_estimate_fleet"]
    assert base["monthly_usd"] <= winner["monthly_usd"]
    assert conf["margin_usd_per_month"] == pytest.approx(
        winner["monthly_usd"] - base["monthly_usd"]
    )
    assert base["found"]


def test_without_an_accuracy_file_the_default_error_is_stated() -> None:
    margin = Margin(0.9, "vllm", Accuracy())
    choice = margin.choices("H100-SXM")["ttft"]
    assert choice.to_dict()["group"] == "default" and choice.how == "no accuracy file"
    assert margin.factors("H100-SXM")["ttft"] == pytest.approx(1 / 0.7)
    fixture = load_accuracy("tests/fixtures/accuracy_sample.json")
    assert Margin(0.9, "vllm", fixture).choices("H100-SXM")["ttft"].how == "exact"
    req: Request = request(SLO_)
    assert not req.margin.on  # the pure search's default: no margin
