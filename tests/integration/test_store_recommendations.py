"""Recommendations in the store (SQLite, and PostgreSQL when configured): saved whole, listed,
read back; a result without a winner is stored too."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.errors import NotFoundError
from planner.recommend.engine import recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.simulate.metrics import SLO
from planner.store import Store
from planner.store.recommendations import (
    _json_ready,
    brief,
    list_recommendations,
    load_recommendation,
    save_recommendation,
)
from planner.workload.rates import RateCurve
from tests.integration.test_recommend_engine import A10G, H100, START, token_pool


def small_request(slo: SLO) -> Request:
    inputs, outputs = token_pool()
    return Request(
        Demand(RateCurve(START, np.array([3600.0, 7200.0, 3600.0])), inputs, outputs, "test"),
        Targets({"default": slo}),
        Constraints(
            model="llama-3.1-8b",
            gpus=("A10G", "H100-SXM"),
            precisions=("bf16",),
            tp_degrees=(1,),
            max_seqs=(128,),
            chunked_prefill=(True,),
        ),
        SearchOptions(verify_top=2, workers=1),
    )


def test_save_list_and_load(store: Store) -> None:
    result = recommend(small_request(SLO(ttft_s=2.0, tpot_s=0.1)), [A10G, H100])
    assert result.winner is not None
    with store.session() as session:
        stored_id = save_recommendation(session, result).id
    none_met = recommend(small_request(SLO(ttft_s=0.001)), [A10G, H100])
    assert none_met.winner is None
    with store.session() as session:
        empty_id = save_recommendation(session, none_met).id
    with store.session() as session:
        runs = [brief(r) for r in list_recommendations(session)]
        assert [r["id"] for r in runs] == [stored_id, empty_id]
        first = load_recommendation(session, stored_id)
        assert first.model == "llama-3.1-8b"
        winner, plan = result.winner, result.plan
        assert plan is not None
        assert first.winner == (f"aws/us-east-1/{winner['instance_type']} llama-3.1-8b bf16 TP1")
        assert first.monthly_usd == pytest.approx(winner["monthly_usd"])
        assert first.purchase == plan["chosen"]["option"]
        assert first.result["winner"]["id"] == result.winner["id"]
        assert first.result["ranked"][0]["verification"]["passed"] is True
        assert first.result["request"]["targets"]["slos"]["default"]["ttft_s"] == 2.0
        empty = load_recommendation(session, empty_id)
        assert empty.winner is None and empty.monthly_usd is None and empty.purchase is None
        assert empty.result["rejected_by_reason"]
        with pytest.raises(NotFoundError, match="no stored recommendation #999"):
            load_recommendation(session, 999)


def test_results_are_plain_json() -> None:
    cleaned = _json_ready({"a": math.inf, "b": [1.0, math.nan], "c": {"d": (1, 2)}, "e": "x"})
    assert cleaned == {"a": None, "b": [1.0, None], "c": {"d": [1, 2]}, "e": "x"}
