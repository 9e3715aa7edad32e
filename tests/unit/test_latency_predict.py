"""``predict_latency``: the one computation behind ``planner latency`` and the Latency model
page; a batch that does not fit as an error or as a result; latency against batch size; the
memory breakdown; the error a profile states."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext

import pytest

from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.latency.engines import deploy, get_engine
from planner.latency.model import DoesNotFitError, LatencyModel
from planner.latency.predict import (
    LatencyPrediction,
    LatencyQuery,
    batch_sizes,
    latency_by_batch,
    memory_breakdown,
)
from planner.latency.profile import Profile, bundled_profiles_path, load_bundled_profiles
from planner.latency.registry import all_profiles, engine_profile, profile_accuracy
from planner.latency.serving import at_batch, max_batch, static_batch
from planner.usecases.predict import predict_latency

L4_8B = LatencyQuery(gpu="L4", model="llama-3.1-8b", sim_requests=0)


def predict(query: LatencyQuery, *, batch_must_fit: bool = True) -> LatencyPrediction:
    """With the bundled profiles only (no store)."""
    return predict_latency(query, nullcontext, batch_must_fit=batch_must_fit)


def test_the_prediction_is_the_library_model_at_the_batch() -> None:
    query = LatencyQuery(gpu="H100-SXM", model="llama-3.1-8b", precision="fp8", batch=32)
    prediction = predict(query)
    result = prediction.result
    catalog = load_catalog()
    deployment = deploy(
        get_engine("trtllm"),
        catalog.gpus.get("H100-SXM"),
        catalog.models.get("llama-3.1-8b"),
        catalog.precisions.get("fp8"),
    )
    assert prediction.deployment == deployment
    assert prediction.profile.name == result["profile"] == "trtllm-default"
    expected = at_batch(LatencyModel(deployment, prediction.profile), 1024, 256, 32)
    assert (result["ttft_ms"], result["tpot_ms"], result["e2e_ms"]) == (
        expected.ttft_ms,
        expected.tpot_ms,
        expected.e2e_ms,
    )
    assert result["kv_capacity_tokens"] == deployment.kv_capacity_tokens
    assert result["kv_cache"] == "fp8"  # TensorRT-LLM follows FP8 weights
    assert result["under_load"] is None and result["batch"] == 32
    assert prediction.batch_problem is None
    json.dumps(result)  # what `planner latency --json` prints


def test_a_batch_that_does_not_fit_is_an_error_or_a_result() -> None:
    big = LatencyQuery(gpu="L4", model="llama-3.1-8b", batch=100_000)
    with pytest.raises(UsageError) as raised:
        predict(big)
    message = str(raised.value)
    assert message.startswith("--batch 100000: 100,000 sequences of 1,280 tokens need")
    prediction = predict(big, batch_must_fit=False)
    assert prediction.batch_problem == message
    result = prediction.result
    assert result["ttft_ms"] is None and result["tpot_ms"] is None and result["e2e_ms"] is None
    # everything that does not depend on the batch is still there
    fits = predict(L4_8B).result
    for key in ("kv_capacity_tokens", "max_concurrent_sequences", "max_output_tokens_per_s"):
        assert result[key] == fits[key]


def test_located_errors_come_before_any_store_is_opened() -> None:
    opened = []

    def sessions() -> AbstractContextManager[None]:
        opened.append(True)
        return nullcontext()

    with pytest.raises(UsageError, match="does not divide the 64 attention heads"):
        predict_latency(LatencyQuery(gpu="H100-SXM", model="llama-3.1-70b", tp=3), sessions)
    with pytest.raises(UsageError, match="--tp 0: expected a whole number of GPUs"):
        predict_latency(LatencyQuery(gpu="H100-SXM", model="llama-3.1-8b", tp=0), sessions)
    with pytest.raises(UsageError, match="exceed the 131,072-token context"):
        predict_latency(
            LatencyQuery(gpu="L4", model="llama-3.1-8b", input_tokens=200_000), sessions
        )
    assert not opened
    with pytest.raises(DoesNotFitError, match="llama-3.1-405b in bf16 does not fit 1 x L4"):
        predict_latency(LatencyQuery(gpu="L4", model="llama-3.1-405b"), sessions)


def test_latency_by_batch_runs_from_one_to_what_the_kv_cache_holds() -> None:
    prediction = predict(L4_8B)
    curve = latency_by_batch(prediction)
    most = prediction.result["max_concurrent_sequences"]
    assert curve["batch"].iloc[0] == 1 and curve["batch"].iloc[-1] == most
    model = prediction.latency_model
    assert most == max_batch(model, 1024, 256)
    first = at_batch(model, 1024, 256, 1)
    assert curve["ttft_ms"].iloc[0] == first.ttft_ms == prediction.result["ttft_ms"]
    assert curve["tpot_ms"].is_monotonic_increasing  # a bigger batch decodes each token slower
    static = predict(LatencyQuery(gpu="L4", model="llama-3.1-8b", batch=4, static=True))
    row = latency_by_batch(static, [4]).iloc[0]
    assert row["ttft_ms"] == static_batch(static.latency_model, 1024, 256, 4).ttft_ms


def test_batch_sizes_are_every_size_or_a_log_spread() -> None:
    assert batch_sizes(5) == [1, 2, 3, 4, 5]
    spread = batch_sizes(5000, points=40)
    assert spread[0] == 1 and spread[-1] == 5000 and len(spread) <= 40
    assert spread == sorted(set(spread))


def test_the_memory_breakdown_adds_up_to_the_device() -> None:
    memory = predict(L4_8B).result["memory"]
    parts = memory_breakdown(memory)
    assert list(parts) == ["weights", "activations", "KV cache", "free"]
    assert sum(parts.values()) == pytest.approx(memory["device_gib"])
    assert parts["KV cache"] == memory["kv_cache_gib"] and parts["free"] > 0


def test_a_bundled_profile_states_its_fit_errors() -> None:
    payload = json.loads(bundled_profiles_path().read_text())
    entry = next(p for p in payload["profiles"] if p["profile"]["name"] == "trtllm-default")
    profile = next(p for p in load_bundled_profiles() if p.name == "trtllm-default")
    accuracy = profile_accuracy(profile)
    assert accuracy is not None
    assert accuracy["origin"] == "bundled"
    assert accuracy["heldout_test"] == entry["heldout_test"]
    assert accuracy["after_all"] == entry["after_all"]
    assert accuracy["points"] == entry["points"] and accuracy["sources"] == entry["sources"]
    assert profile_accuracy(Profile("never fitted")) is None


def test_engine_profile_names_another_engines_profile_as_the_way_out() -> None:
    vllm = get_engine("vllm")
    assert engine_profile(all_profiles(), "L4", vllm, None).name == "vllm-default"
    with pytest.raises(UsageError, match="no calibration profile named 'nope'"):
        engine_profile(all_profiles(), "L4", vllm, "nope")


def test_the_registry_resolves_among_profile_values_stored_first() -> None:
    """Profiles are values: a stored one (first in the list) wins over the bundled one for the
    same GPU and engine, and by name; the bundled defaults stay behind it."""
    mine = Profile("mine-l4", "vllm", "L4", compute_eff=0.5)
    profiles = all_profiles([mine])
    assert profiles[0] == mine and profiles[1:] == load_bundled_profiles()
    vllm = get_engine("vllm")
    assert engine_profile(profiles, "L4", vllm, None) == mine
    assert engine_profile(profiles, "L4", vllm, "mine-l4") == mine
    assert engine_profile(all_profiles(), "L4", vllm, None).name == "vllm-default"
    stored = {"origin": "store", "points": 3}
    assert profile_accuracy(mine, stored) == stored
