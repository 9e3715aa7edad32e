"""``planner prices ... --kind api`` as a user runs it: the installed command, a real store, real
files: the bundled per-token snapshot on first use, listing by a log's model name, a good sheet
imported over list prices and a bad one refused with its row and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pricing.api import load_api_snapshot
from tests.e2e.test_cli import run


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_list_loads_the_api_snapshot_and_matches_log_names(home: Path) -> None:
    result = run(home, "prices", "list", "--kind", "api", "--json")
    assert result.returncode == 0, result.stderr
    assert "loaded the bundled API snapshot as API version 1" in result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == len(load_api_snapshot())
    assert all(r["source_url"].startswith("https://") and r["source_date"] for r in rows)
    # a log's dated name finds its model's offers, and nothing else
    mini = run(
        home, "prices", "list", "--kind", "api", "--model", "gpt-4o-mini-2024-07-18", "--json"
    )
    assert mini.returncode == 0 and "loaded" not in mini.stderr
    found = json.loads(mini.stdout)
    assert {(r["provider"], r["offer"]) for r in found} == {
        ("openai", "gpt-4o-mini"),
        ("azure", "gpt-4o-mini"),
    }
    assert all(r["version_id"] == 1 and r["source_kind"] == "snapshot" for r in found)
    # an open-weights name as a host's log writes it: its catalog model's hosts
    llama = run(
        home, "prices", "list", "--kind", "api", "--model", "meta-llama/Llama-3.1-8B-Instruct-Turbo"
    )
    assert llama.returncode == 0, llama.stderr
    assert "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo" in llama.stdout  # never cut
    assert "accounts/fireworks/models/llama-v3p1-8b-instruct" in llama.stdout
    assert "$0.02" in llama.stdout and "$0.04" in llama.stdout  # DeepInfra's in and out
    groq = run(home, "prices", "list", "--kind", "api", "--provider", "groq")
    assert groq.returncode == 0 and "$0.0375" in groq.stdout  # cached gpt-oss-20b input
    # instance prices are listed as before
    instances = run(home, "prices", "list", "--gpu", "A10G", "--json")
    assert instances.returncode == 0 and all(
        "usd_per_hour" in r for r in json.loads(instances.stdout)
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "api", "--provider", "grok"], "--provider 'grok': no per-token prices"),
        (["--kind", "api", "--model", "my-finetune"], "--model 'my-finetune': no per-token price"),
        (["--kind", "api", "--gpu", "H100"], "--gpu: filters of instance prices"),
        (["--model", "gpt-4o"], "--model: a filter of per-token prices; add --kind api"),
        (["--kind", "tokens"], "--kind 'tokens': expected one of instance, api"),
    ],
)
def test_bad_filters_are_usage_errors(home: Path, args: list[str], message: str) -> None:
    result = run(home, "prices", "list", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.stderr


def test_import_a_sheet_over_list_prices_and_refuse_a_bad_one(home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "provider,offer,input_usd_per_mtok,output_usd_per_mtok,batch_discount\n"
        "openai,gpt-4o-mini,0.12,0.48,0.5\n"
        "openai,gpt-4o,2.5,10,2\n"
    )
    refused = run(home, "prices", "import", str(bad), "--kind", "api")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"{bad}: row 2, line 3, column 'batch_discount': expected the share" in refused.stderr
    versions = json.loads(run(home, "prices", "versions", "--kind", "api", "--json").stdout)
    assert [v["source_kind"] for v in versions] == ["snapshot"]  # nothing stored

    good = tmp_path / "edp.csv"
    good.write_text(
        "provider,offer,input_usd_per_mtok,output_usd_per_mtok,cached_input_usd_per_mtok\n"
        "openai,gpt-4o-mini,0.12,0.48,0.06\n"
    )
    result = run(home, "prices", "import", str(good), "--kind", "api", "--label", "EDP", "--json")
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    assert (imported["kind"], imported["imported"], imported["label"]) == ("api", True, "EDP")
    (override,) = imported["overrides"]
    assert (override["input_usd_per_mtok"], override["list_input_usd_per_mtok"]) == (0.12, 0.15)
    again = run(home, "prices", "import", str(good), "--kind", "api")
    assert again.returncode == 0 and "already imported" in again.stdout
    listed = json.loads(
        run(home, "prices", "list", "--kind", "api", "--provider", "openai", "--json").stdout
    )
    mini = next(r for r in listed if r["offer"] == "gpt-4o-mini")
    assert (mini["cached_input_usd_per_mtok"], mini["source_kind"]) == (0.06, "user")
    # the instance price history is untouched by API sheets
    instance_versions = json.loads(run(home, "prices", "versions", "--json").stdout)
    assert all(v["source_kind"] == "snapshot" for v in instance_versions)
    loaded = json.loads(run(home, "prices", "load-snapshot", "--kind", "api", "--json").stdout)
    assert (loaded["kind"], loaded["loaded"]) == ("api", False)
