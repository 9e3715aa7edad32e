"""``planner recommend`` on a gateway log naming proprietary models (issue 34, deliverable 5),
as a user runs it: ``--model gpt-4o-mini`` has no self-hosted option, so the plan is the API
bill (the month's tokens at the snapshot's prices, worked by hand) and says how to name a
substitute; ``--substitute gpt-4o-mini=llama-3.1-8b`` searches the catalog model on the log
model's requests and prices the API by the log's name, saying quality is the user's call; a
fleet of the log's models leaves the proprietary ones out with their bills; bad values are
clear errors, never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pricing.api import load_api_snapshot
from tests.e2e.test_cli import run
from tests.e2e.test_multi_model_log import ingest
from tests.e2e.test_multi_model_recommend_cli import FAST as GPU_ONLY
from tests.e2e.test_multi_model_recommend_cli import TARGETS

FAST = [a for a in GPU_ONLY if a not in ("--api", "never")]  # the API is what is tested here

MINI = "gpt-4o-mini-2024-07-18"
HAIKU = "claude-3-5-haiku-20241022"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
# 300 requests over an hour: 2 in 5 gpt-4o-mini, 1 in 5 claude-3-5-haiku, 2 in 5 llama-3.1-8b
NAMES = [MINI, LLAMA, MINI, HAIKU, LLAMA]
ROWS = [(i * 12.0, NAMES[i % 5], 500 + (i * 37) % 1000, 100 + (i * 13) % 200) for i in range(300)]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("proprietary")
    home = folder / "home"
    ingest(home, folder, "gw", ROWS)
    ingest(home, folder, "mini", [r for r in ROWS if r[1] == MINI])
    return home


def _json(home: Path, *args: str) -> dict[str, Any]:
    done = run(home, "recommend", *TARGETS, *args, "--json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _openai_mini() -> tuple[float, float]:
    [price] = [
        p for p in load_api_snapshot() if p.provider == "openai" and p.offer == "gpt-4o-mini"
    ]
    return price.input_usd_per_mtok, price.output_usd_per_mtok


def test_a_proprietary_model_is_planned_as_its_api_bill(home: Path) -> None:
    data = _json(home, "--dataset", "gw", "--model", "gpt-4o-mini", "--api-provider", "openai")
    assert data["winner"] is None and data["ranked"] == []
    api = data["api"]
    assert api["choice"] == "api" and api["offer"]["offer"] == "gpt-4o-mini"
    assert api["self_hosted_monthly_usd"] is None and api["break_even"] is None
    assert api["pools"][0]["kind"] == "api"
    # the month's tokens worked by hand from gpt-4o-mini's requests: 120 in the log's hour
    mine = [r for r in ROWS if r[1] == MINI]
    per_month = len(mine) / data["demand"]["hours"] * 730
    tokens_in = per_month * sum(r[2] for r in mine) / len(mine)
    tokens_out = per_month * sum(r[3] for r in mine) / len(mine)
    month = api["month"]
    assert month["requests"] == pytest.approx(per_month)
    assert month["input_tokens"] == pytest.approx(tokens_in)
    assert month["output_tokens"] == pytest.approx(tokens_out)
    price_in, price_out = _openai_mini()
    bill = (tokens_in * price_in + tokens_out * price_out) / 1e6
    assert api["api_monthly_usd"] == pytest.approx(bill)
    assert "no self-hosted option without a substitute" in data["api_only"]
    assert "--substitute 'gpt-4o-mini=CATALOG'" in data["notes"][0]
    # stored: the list names the API as the plan, with its monthly bill
    listed = run(home, "recommendations", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    stored = json.loads(listed.stdout)[-1]
    assert stored["winner"] == "per-token API: openai gpt-4o-mini"
    assert stored["monthly_usd"] == pytest.approx(bill)


def test_the_text_result_says_there_is_no_self_hosted_option(home: Path) -> None:
    # a log of gpt-4o-mini alone, planned without --model: its API bill, not a GPU fleet
    done = run(home, "recommend", *TARGETS, "--dataset", "mini")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "no self-hosted option without a substitute" in text
    assert "--substitute 'gpt-4o-mini=CATALOG'" in text
    assert "per-token API:" in text and "/month for this demand: api" in text
    stored = re.search(r"stored as recommendation #(\d+)", text)
    assert stored is not None
    shown = run(home, "recommendations", "show", stored.group(1))
    assert shown.returncode == 0, shown.stderr
    shown_text = " ".join(shown.stdout.split())
    assert "gpt-4o-mini: per-token API: " in shown_text and "/month (per-token)" in shown_text


def test_a_substitute_is_searched_self_hosted_and_the_api_priced_by_the_log_name(
    home: Path,
) -> None:
    args = ["--dataset", "gw", "--model", "gpt-4o-mini", "--api-provider", "openai"]
    data = _json(home, *args, "--substitute", "gpt-4o-mini=llama-3.1-8b", *FAST)
    assert data["substitute"] == {"log_model": "gpt-4o-mini", "catalog_model": "llama-3.1-8b"}
    winner = data["winner"]
    assert winner is not None and winner["model"] == "llama-3.1-8b"
    assert data["request"]["constraints"]["model"] == "llama-3.1-8b"
    # gpt-4o-mini's 120 requests only, not the llama requests the log has too
    assert data["demand"]["requests"] == 120
    api = data["api"]
    assert api["offer"]["model"] == "gpt-4o-mini" and api["offer"]["provider"] == "openai"
    assert api["self_hosted_monthly_usd"] == pytest.approx(winner["monthly_usd"])
    assert any("is your call" in note for note in data["notes"])
    plain = [a for a in FAST if a != "--json"]
    done = run(
        home, "recommend", *TARGETS, *args, "--substitute", "gpt-4o-mini=llama-3.1-8b", *plain
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "substitute: llama-3.1-8b served in place of gpt-4o-mini" in text
    assert "its quality against gpt-4o-mini is your call" in text


def test_a_fleet_leaves_proprietary_models_out_with_their_bills(home: Path) -> None:
    data = _json(home, "--dataset", "gw", "--size-buckets", "none", *FAST)
    assert data["kind"] == "fleet" and data["winner"] is not None
    # the catalog model is planned (on GPUs or, this log being tiny, on an API); the
    # proprietary ones are not in the fleet
    winner = data["winner"]
    planned = [p["models"] for p in winner["pools"] + winner.get("api_pools", [])]
    assert planned == [["llama-3.1-8b"]]
    notes = " ".join(data["notes"])
    assert "left 'gpt-4o-mini' (120 requests, 40.0%) out of the GPU fleet" in notes
    assert "left 'claude-3-5-haiku' (60 requests, 20.0%) out of the GPU fleet" in notes
    assert "/month" in notes and "--substitute 'claude-3-5-haiku=CATALOG'" in notes


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--substitute", "gpt-4o-mini"], "--substitute 'gpt-4o-mini': expected LOGNAME=CATALOG"),
        (["--substitute", "gpt-4o-mini=gpt-5"], "'gpt-5' is not a catalog model"),
        (["--substitute", "o3=llama-3.1-8b"], "dataset 'gw' has no requests of model 'o3'"),
        (
            ["--substitute", "gpt-4o-mini=llama-3.1-8b", "--model-map", "gpt-4o-mini=qwen3-8b"],
            "given to --model-map and to --substitute",
        ),
        (["--api", "never"], "--api never: 'gpt-4o-mini' is a proprietary model"),
        (["--api-provider", "fireworks"], "providers that do: azure, openai"),
        (["--api-ttft", "0"], "--api-ttft '0': expected a duration above 0"),
        (["--api-tpot", "1m"], "--api-tpot '1m': expected at most 10 s"),
    ],
)
def test_bad_values_are_clear_errors(home: Path, args: list[str], said: str) -> None:
    done = run(home, "recommend", *TARGETS, "--dataset", "gw", "--model", "gpt-4o-mini", *args)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert said in " ".join(done.stderr.split())
