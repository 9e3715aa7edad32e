"""``planner recommend`` on a gateway log of two models, as a user runs it: without --model
every model gets its own pools (each with its own targets), with --model only that model's
requests are planned, and names the catalog lacks are an error that says how to map or skip
them (the share left out stated when skipped)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli import run
from tests.e2e.test_multi_model_log import home as home
from tests.e2e.test_multi_model_log import rows
from tests.e2e.test_narrow_tables_cli import run80

# one configuration per model keeps each search to a few simulations
FAST = [
    "--gpu",
    "H100-SXM",
    "--precision",
    "fp8",
    "--tp",
    "1,2",
    "--max-seqs",
    "64",
    "--chunked-prefill",
    "on",
    "--confidence",
    "0",
    "--no-growth-check",
    "--no-compare-gpus",
    "--tighten-steps",
    "0",
    "--verify-top",
    "1",
    "--workers",
    "1",
    "--api",
    "never",  # the GPU pools are what these tests are about (a tiny log goes to an API)
    "--no-save",
    "--json",
    "-q",
]
TARGETS = ["--slo-ttft-p99", "2s", "--slo-tpot-p99", "100ms"]


def recommend(home: Path, *args: str) -> dict[str, Any]:
    done = run(home, "recommend", *TARGETS, *FAST, *args)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_every_model_of_the_log_gets_its_own_pools_and_targets(home: Path) -> None:
    data = recommend(
        home, "--dataset", "multi", "--size-buckets", "none", "--slo", "llama-3.1-70b:ttft=5s"
    )
    winner = data["winner"]
    assert data["kind"] == "fleet" and winner is not None
    by_model = {p["models"][0]: p for p in winner["pools"]}
    assert set(by_model) == {"llama-3.1-8b", "llama-3.1-70b"}
    # 400 requests, every fourth one the 70B's
    assert by_model["llama-3.1-70b"]["requests"] == pytest.approx(100)
    assert by_model["llama-3.1-8b"]["share_of_requests"] == pytest.approx(0.75)
    for pool in winner["pools"]:
        for key in (
            "provider",
            "region",
            "instance_type",
            "gpu",
            "precision",
            "tp",
            "input_tokens_range",
            "instances_peak",
            "monthly_usd",
        ):
            assert pool[key] is not None, key
        assert pool["verified"]
    assert winner["monthly_usd"] == pytest.approx(sum(p["monthly_usd"] for p in winner["pools"]))
    assert winner["saving_vs_single_pool_usd"] == pytest.approx(0.0, abs=1e-6)
    targets = data["request"]["targets"]
    assert targets["llama-3.1-70b"]["slos"]["default"]["ttft_s"] == 5.0
    assert targets["llama-3.1-8b"]["slos"]["default"]["ttft_s"] == 2.0
    assert by_model["llama-3.1-70b"]["p99_ttft_s"] <= 5.0
    assert by_model["llama-3.1-8b"]["p99_ttft_s"] <= 2.0


def test_model_plans_only_that_models_requests(home: Path) -> None:
    data = recommend(home, "--dataset", "multi", "--model", "llama-3.1-70b")
    assert data.get("kind") != "fleet"
    assert data["demand"]["requests"] == pytest.approx(100)
    assert data["demand"]["mean_input_tokens"] >= 2000  # the 70B's prompts, never the 8B's
    assert data["winner"]["pools"][0]["models"] == ["llama-3.1-70b"]


def test_unmapped_names_are_listed_or_skipped_with_their_share(home: Path) -> None:
    refused = run(home, "recommend", "--dataset", "odd", *TARGETS, *FAST)
    assert refused.returncode == 2
    message = " ".join(refused.stderr.split())
    assert "--model-map LOGNAME=CATALOG" in message and "--unmapped skip" in message
    assert "Traceback" not in refused.stderr
    data = recommend(home, "--dataset", "odd", "--size-buckets", "none", "--unmapped", "skip")
    skipped = data["demand"]["skipped"]
    assert skipped is not None and "%" in skipped
    total = sum(p["requests"] for p in data["winner"]["pools"])
    # every tenth request (all of them the 8B's) is logged under a name the catalog lacks
    renamed = sum(1 for i in range(len(rows())) if i % 10 == 1)
    assert total == pytest.approx(len(rows()) - renamed)
    assert f"{renamed:,} requests" in skipped


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--size-buckets", "2048,512"], "--size-buckets"),
        (["--size-buckets", "lots"], "--size-buckets"),
        (["--unmapped", "drop"], "--unmapped"),
        (["--model-map", "no-equals-sign"], "--model-map"),
        (["--model-map", "ours=not-a-model"], "not-a-model"),
        (["--model", "llama-3.1-405b"], "llama-3.1-405b"),  # the log has none of its requests
    ],
)
def test_bad_fleet_options_say_what_was_expected(home: Path, args: list[str], says: str) -> None:
    done = run(home, "recommend", "--dataset", "multi", *TARGETS, *FAST, *args)
    assert done.returncode == 2, done.stdout
    assert says in done.stderr and "Traceback" not in done.stderr


def test_a_stored_fleet_is_listed_and_shown_with_its_pools(home: Path) -> None:
    fast = [a for a in FAST if a not in ("--no-save", "--json")]
    done = run(home, "recommend", "--dataset", "multi", "--size-buckets", "none", *TARGETS, *fast)
    assert done.returncode == 0, done.stderr
    stored = int(done.stdout.rsplit("stored as recommendation #", 1)[1].split()[0])
    shown = run(home, "recommendations", "show", str(stored))
    assert shown.returncode == 0, shown.stderr
    assert "2 pools" in shown.stdout and "cost per model" in shown.stdout
    listed = run80(home, "recommendations", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # the winner's pools are folded between words, never cut
    text = " ".join(listed.stdout.split())
    assert "g6.xlarge" in text or "p5.4xlarge" in text


def test_a_tiny_log_s_models_are_bought_by_the_token(home: Path) -> None:
    """400 requests over the log's hours cost far less on an API than any GPU kept all month:
    with the API allowed each model leaves the GPU fleet for an API pool, said in the text."""
    fast = [a for a in FAST if a not in ("--api", "never", "--json")]
    done = run(home, "recommend", "--dataset", "multi", "--size-buckets", "none", *TARGETS, *fast)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "0 pools and 2 model(s) on a per-token API" in text
    assert text.count(": per-token API, ") == 2
    assert "pools, each verified" not in text  # no GPU pool: no table of them
    data = recommend(home, "--dataset", "multi", "--size-buckets", "none", "--api", "allow")
    winner = data["winner"]
    assert winner["pools"] == [] and len(winner["api_pools"]) == 2
    assert winner["monthly_usd"] == pytest.approx(
        sum(p["monthly_usd"] for p in winner["api_pools"])
    )
    assert {m["choice"] for m in data["models"]} == {"api"}
