"""``planner simulate`` with a per-token API behind the fleet (``--api-overflow-queue``): what
the replicas are too busy for goes to the API, its rate limit caps what it takes, its tokens
may be priced, and the run's latency percentiles count its requests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import AZURE_CODE
from tests.e2e.test_cli import run

# One replica and the code trace at four times its load: the replica is saturated (P99 TTFT
# some 30 s without help).
SATURATED = [
    "simulate",
    "--dataset",
    "code",
    "--gpu",
    "H100-SXM",
    "--model",
    "llama-3.1-8b",
    "--precision",
    "fp8",
    "--replicas",
    "1",
    "--load-scale",
    "4",
    "--requests",
    "8000",
    "--confidence",
    "0",
    "-q",
]
OFFER = "deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("sim-api") / "home"
    assert run(home, "ingest", str(AZURE_CODE), "--name", "code").returncode == 0
    return home


def simulate_json(home: Path, *args: str) -> dict[str, Any]:
    result = run(home, *SATURATED, *args, "--json")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture(scope="module")
def without_api(home: Path) -> dict[str, Any]:
    return simulate_json(home)


def test_an_api_behind_a_saturated_fleet_takes_the_overflow(
    home: Path, tmp_path: Path, without_api: dict[str, Any]
) -> None:
    requests = tmp_path / "requests.csv"
    data = simulate_json(home, "--api-overflow-queue", "32", "--out-requests", str(requests))
    api, fleet, overall = data["summary"]["api"], data["fleet"], data["summary"]["all"]
    assert "api" not in without_api["summary"]
    # some requests overflowed, not all; the counts agree with the fleet's and the rows'
    assert 0 < api["requests"] < data["requests"] == 8000
    assert api["requests"] == fleet["overflowed"]
    assert api["input_tokens"] == fleet["overflow_input_tokens"] > 0
    assert api["output_tokens"] == fleet["overflow_output_tokens"] > 0
    assert api["rate_limited"] == fleet["overflow_rate_limited"] == 0  # no limit given
    assert api["share"] == pytest.approx(api["requests"] / data["requests"])
    assert (api["queue"], api["ttft_s"], api["tpot_s"]) == (32, 0.5, 0.012)
    assert api["price"] is None and api["cost_usd"] is None
    frame = pd.read_csv(requests)
    on_api = frame[frame["replica"] == -2]
    assert len(on_api) == api["requests"]
    assert int(on_api["input_tokens"].sum()) == api["input_tokens"]
    assert int(on_api["output_tokens"].sum()) == api["output_tokens"]
    # the API's requests finished, and count in the percentiles: every request finished
    assert overall["finished"] == data["requests"] and overall["rejected"] == 0
    assert on_api["first_token_s"].notna().all()
    # what the API took, the replica did not have to queue: P99 TTFT falls a long way
    before = without_api["summary"]["all"]["ttft"]["p99"]
    assert overall["ttft"]["p99"] < before / 5
    assert any("replica -2" in note for note in data["notes"])


def test_a_rate_limit_caps_the_overflow(home: Path, without_api: dict[str, Any]) -> None:
    free = simulate_json(home, "--api-overflow-queue", "32")["summary"]["api"]
    data = simulate_json(home, "--api-overflow-queue", "32", "--api-rpm", "30")
    api = data["summary"]["api"]
    minutes = data["simulated_s"] / 60
    assert 0 < api["requests"] <= 30 * (minutes + 1)
    assert api["requests"] < free["requests"]
    assert api["rate_limited"] > 0 and api["rpm"] == 30
    # sent back, they waited on the replica: P99 TTFT well above the unlimited API's
    assert data["summary"]["all"]["ttft"]["p99"] > 5 * 1.01
    tokens = simulate_json(home, "--api-overflow-queue", "32", "--api-tpm", "20000")
    per_minute = tokens["summary"]["api"]
    assert 0 < per_minute["input_tokens"] + per_minute["output_tokens"] <= 20000 * (minutes + 1)
    assert per_minute["rate_limited"] > 0


def test_the_api_priced_beside_the_fleet(home: Path) -> None:
    data = simulate_json(
        home, "--api-overflow-queue", "32", "--api-price", OFFER, "--price-per-hour", "4"
    )
    api = data["summary"]["api"]
    price = api["price"]
    assert (price["provider"], price["offer"]) == tuple(OFFER.split("/", 1))
    expected = (
        api["input_tokens"] * price["input_usd_per_mtok"]
        + api["output_tokens"] * price["output_usd_per_mtok"]
    ) / 1e6
    assert api["cost_usd"] == pytest.approx(expected) and api["cost_usd"] > 0
    assert api["fleet_cost_usd"] == pytest.approx(data["cost"]["total"])
    assert api["total_usd"] == pytest.approx(api["cost_usd"] + data["cost"]["total"])
    by_provider = simulate_json(home, "--api-overflow-queue", "32", "--api-provider", "deepinfra")
    assert by_provider["summary"]["api"]["price"]["provider"] == "deepinfra"


def test_human_output_says_what_the_api_took(home: Path) -> None:
    result = run(
        home, *SATURATED, "--api-overflow-queue", "32", "--api-rpm", "30", "--api-price", OFFER
    )
    assert result.returncode == 0, result.stderr
    assert "API behind the fleet (at 32 outstanding per replica" in result.stdout
    assert "sent back to the replicas by its rate limit" in result.stdout
    assert "API cost: $" in result.stdout and "fleet GPU cost -" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--api-overflow-queue", "-1"], "--api-overflow-queue -1: expected"),
        (["--api-overflow-queue", "4", "--api-ttft", "0"], "--api-ttft '0': expected a duration"),
        (["--api-overflow-queue", "4", "--api-tpot", "0ms"], "--api-tpot '0ms': expected"),
        (["--api-overflow-queue", "4", "--api-tpot", "20s"], "--api-tpot 20: expected"),
        (["--api-overflow-queue", "4", "--api-rpm", "0"], "--api-rpm 0: expected a rate limit"),
        (["--api-overflow-queue", "4", "--api-tpm", "nan"], "--api-tpm nan: expected"),
        (["--api-rpm", "10"], "give --api-overflow-queue N"),
        (["--api-overflow-queue", "4", "--api-price", "nope"], "expected PROVIDER/OFFER"),
        (["--api-overflow-queue", "4", "--api-price", "x/y"], "no API price in force"),
        (["--api-overflow-queue", "4", "--api-provider", "nobody"], "no API price in force"),
        (
            ["--api-overflow-queue", "4", "--api-price", OFFER, "--api-provider", "deepinfra"],
            "give one of them",
        ),
        (["--api-overflow-queue", "4", "--clients", "2"], "the clients; --api-overflow-queue"),
        (
            ["--api-overflow-queue", "4", "--prefill-replicas", "1", "--decode-replicas", "1"],
            "a disaggregated run",
        ),
    ],
)
def test_bad_api_settings_are_clear_errors(home: Path, args: list[str], message: str) -> None:
    result = run(home, *SATURATED, *args)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert message in " ".join(result.stderr.split()), result.stderr
