"""Proprietary models in a log (issue 34, deliverable 5): names the API price sheet prices and
no catalog model is are told apart from unknown names, ``--substitute LOGNAME=CATALOG`` maps
a log model (every dated name of it) to the catalog model served in its place, and the plan
of a model asked for says what is searched and by which name the API is priced."""

from __future__ import annotations

import pytest

from planner.errors import UsageError
from planner.recommend.proprietary import ApiModelOf, api_model_of, planned_model
from planner.workload.model_names import parse_model_map, resolve_models
from pricing.api import load_api_snapshot

pytestmark = pytest.mark.unit

MINI = "gpt-4o-mini-2024-07-18"
HAIKU = "claude-3-5-haiku-20241022"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
COUNTS: dict[str | None, int] = {MINI: 120, HAIKU: 60, LLAMA: 120, "our-finetune": 5}


@pytest.fixture(scope="module")
def api_of() -> ApiModelOf:
    return api_model_of(load_api_snapshot())


def test_proprietary_names_are_told_from_open_and_unknown_ones(api_of: ApiModelOf) -> None:
    assert api_of(MINI) == "gpt-4o-mini"
    assert api_of("claude-3-5-haiku") == "claude-3-5-haiku"
    assert api_of(LLAMA) is None  # hosted by the token, but a catalog model
    assert api_of("our-finetune") is None and api_of("") is None


def test_a_log_keeps_proprietary_models_apart_and_unknown_names_still_fail(
    api_of: ApiModelOf,
) -> None:
    with pytest.raises(UsageError) as caught:
        resolve_models(COUNTS, api_model_of=api_of)
    assert "'our-finetune'" in str(caught.value) and MINI not in str(caught.value)
    resolution = resolve_models(COUNTS, api_model_of=api_of, unmapped="skip")
    assert resolution.models() == ["llama-3.1-8b"]
    assert resolution.api_models() == ["gpt-4o-mini", "claude-3-5-haiku"]
    assert resolution.skipped == {"our-finetune": 5}
    only = resolution.only("gpt-4o-mini")
    assert only.api_log_names("gpt-4o-mini") == [MINI] and only.total == 120
    assert "gpt-4o-mini 39.3% (proprietary" in resolution.describe()


def test_a_substitute_maps_every_name_of_the_model_and_must_be_in_the_log(
    api_of: ApiModelOf,
) -> None:
    subs = parse_model_map(["gpt-4o-mini=Llama-3.1-8B"], "--substitute")
    assert subs == {"gpt-4o-mini": "llama-3.1-8b"}
    resolution = resolve_models(COUNTS, api_model_of=api_of, unmapped="skip", substitutes=subs)
    assert resolution.catalog_of[MINI] == "llama-3.1-8b"
    assert resolution.api_models() == ["claude-3-5-haiku"]
    with pytest.raises(UsageError, match=r"--substitute 'o1=llama-3.1-8b': .* no requests"):
        resolve_models(COUNTS, api_model_of=api_of, substitutes={"o1": "llama-3.1-8b"})
    for bad, said in (("gpt-4o-mini", "expected LOGNAME=CATALOG"), ("x=nope", "not a catalog")):
        with pytest.raises(UsageError, match=f"--substitute '{bad}'.*{said}"):
            parse_model_map([bad], "--substitute")


def test_the_plan_names_the_model_searched_and_the_name_priced(api_of: ApiModelOf) -> None:
    subs = {"gpt-4o-mini": "llama-3.1-8b"}
    substituted = planned_model(MINI, subs, api_of)  # a dated name of the same model
    assert (substituted.model, substituted.api_model) == ("llama-3.1-8b", "gpt-4o-mini")
    assert substituted.substitute == {"log_model": "gpt-4o-mini", "catalog_model": "llama-3.1-8b"}
    assert planned_model("llama-3.1-8b", subs, api_of).api_model == "gpt-4o-mini"
    alone = planned_model("gpt-4o-mini", {}, api_of)
    assert (alone.model, alone.api_model, alone.substitute) == (None, "gpt-4o-mini", None)
    assert planned_model("llama-3.1-70b", subs, api_of).api_model is None
