"""Per-token API prices (pricing.api): the bundled snapshot, its provenance, the build script
that derives it, a sheet's validation errors, the cost of tokens, and matching a log's model
names to the offers that serve them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from planner.errors import InputFileError, UsageError
from planner.latency.catalog import load_catalog
from pricing.api import (
    API_COLUMNS,
    TokenPrice,
    api_prices_for,
    api_snapshot_path,
    check_api_header,
    cost_usd,
    load_api_snapshot,
    model_key,
    parse_api_rows,
)
from pricing.snapshot import read_csv
from tests.conftest import WriteFile

ROOT = Path(__file__).resolve().parents[2]
PRICES = ROOT / "data" / "prices"


@pytest.fixture(scope="module")
def prices() -> list[TokenPrice]:
    return load_api_snapshot()


def _price(**changes: object) -> TokenPrice:
    base: dict[str, object] = {
        "provider": "openai",
        "offer": "gpt-x",
        "model": "gpt-x",
        "catalog_model": None,
        "input_usd_per_mtok": 2.0,
        "output_usd_per_mtok": 8.0,
        "cached_input_usd_per_mtok": 0.5,
        "batch_discount": 0.5,
        "rpm": None,
        "tpm": None,
        "context_tokens": None,
        "source_url": "https://example.com/pricing",
        "source_date": "2026-11-20",
    }
    base.update(changes)
    return TokenPrice(**base)  # type: ignore[arg-type]


# -- the bundled snapshot ----------------------------------------------------------------------


def test_every_price_has_a_source_url_date_and_provenance(prices: list[TokenPrice]) -> None:
    assert len(prices) >= 40
    for p in prices:
        assert p.source_url.startswith("https://"), p
        assert p.source_date == "2026-11-20", p
        assert "BerriAI/litellm" in p.provenance and "1.110.2" in p.provenance, p
        assert p.input_usd_per_mtok > 0 and p.output_usd_per_mtok > 0, p
        if p.cached_input_usd_per_mtok is not None:
            assert 0 < p.cached_input_usd_per_mtok <= p.input_usd_per_mtok, p
        if p.batch_discount is not None:
            assert 0 < p.batch_discount < 1, p
    keys = [(p.provider, p.offer) for p in prices]
    assert len(keys) == len(set(keys))


def test_catalog_models_are_canonical_catalog_names(prices: list[TokenPrice]) -> None:
    names = set(load_catalog().models.names())
    served = {p.catalog_model for p in prices if p.catalog_model is not None}
    assert served <= names
    # the open-weights models the issue names, each on at least one host
    for model in (
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-4-scout",
        "llama-4-maverick",
        "mixtral-8x7b",
        "mistral-7b",
        "qwen2.5-72b",
        "qwen3-8b",
        "qwen3-32b",
        "qwen3-235b-a22b",
        "deepseek-v3",
        "deepseek-r1",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "gemma-3-27b",
    ):
        assert model in served, model
    assert {p.provider for p in prices} >= {
        "openai",
        "anthropic",
        "google",
        "azure",
        "bedrock",
        "together",
        "fireworks",
        "groq",
        "deepinfra",
    }


def test_known_prices_match_the_litellm_extract(prices: list[TokenPrice]) -> None:
    """Each figure is the extract's per-token price times a million, nothing else."""
    extract = json.loads(
        (PRICES / "sources" / "litellm_1.110.2_model_prices_extract.json").read_text()
    )
    by_key = {(p.provider, p.offer): p for p in prices}
    mini = by_key["openai", "gpt-4o-mini"]
    row = extract["gpt-4o-mini"]
    assert mini.input_usd_per_mtok == pytest.approx(row["input_cost_per_token"] * 1e6)
    assert mini.output_usd_per_mtok == pytest.approx(row["output_cost_per_token"] * 1e6)
    assert mini.cached_input_usd_per_mtok == pytest.approx(row["cache_read_input_token_cost"] * 1e6)
    assert mini.batch_discount == pytest.approx(
        1 - row["input_cost_per_token_batches"] / row["input_cost_per_token"]
    )
    assert (mini.input_usd_per_mtok, mini.output_usd_per_mtok) == (0.15, 0.6)
    assert mini.source_url == row["source"]
    # an open-weights host: DeepInfra's Llama 3.1 8B Turbo
    turbo = by_key["deepinfra", "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"]
    row = extract["deepinfra/meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"]
    assert turbo.input_usd_per_mtok == pytest.approx(row["input_cost_per_token"] * 1e6)
    assert turbo.catalog_model == "llama-3.1-8b"
    # Gemini's rate limits as LiteLLM records them
    flash = by_key["google", "gemini-2.5-flash"]
    assert (flash.rpm, flash.tpm) == (extract["gemini/gemini-2.5-flash"]["rpm"], 8_000_000)
    # Anthropic: LiteLLM's batch price is half the list price
    assert by_key["anthropic", "claude-haiku-4-5"].batch_discount == 0.5


def test_offers_deprecated_before_the_snapshot_date_are_left_out(
    prices: list[TokenPrice],
) -> None:
    extract = json.loads(
        (PRICES / "sources" / "litellm_1.110.2_model_prices_extract.json").read_text()
    )
    assert extract["o3-mini"]["deprecation_date"] < "2026-11-20"
    assert not [p for p in prices if p.offer == "o3-mini"]


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_api_snapshot", PRICES / "build_api_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_build_script_reproduces_the_snapshot_from_its_extract() -> None:
    build = _build_module()
    rows, skipped = build.build_rows(json.loads(build.EXTRACT.read_text(encoding="utf-8")))
    assert build.render(rows).encode() == api_snapshot_path().read_bytes()
    assert len(rows) + len(skipped) == len(build.OFFERS)
    header, _ = read_csv(api_snapshot_path())
    assert tuple(header) == API_COLUMNS == build.COLUMNS


# -- reading a sheet ---------------------------------------------------------------------------

HEADER = ",".join(API_COLUMNS) + "\n"
GOOD_ROW = (
    "openai,gpt-x,gpt-x,,2,8,0.5,0.5,500,30000,128000,USD,https://example.com/p,2026-11-20,"
    "via a test,\n"
)


def _read(path: Path, *, strict: bool = True) -> list[TokenPrice]:
    header, rows = read_csv(path)
    check_api_header(path, header, required=API_COLUMNS if strict else ("provider",))
    return parse_api_rows(path, rows, defaults={}, strict=strict)


def test_a_good_sheet_reads(write: WriteFile) -> None:
    (price,) = _read(write("ok.csv", HEADER + GOOD_ROW))
    assert price == _price(
        rpm=500,
        tpm=30000,
        context_tokens=128000,
        provenance="via a test",
        source_url="https://example.com/p",
    )


@pytest.mark.parametrize(
    ("cells", "column", "expected"),
    [
        ({4: "0"}, "input_usd_per_mtok", "expected a positive price"),
        ({4: "cheap"}, "input_usd_per_mtok", "expected a number"),
        ({5: ""}, "output_usd_per_mtok", "got a blank"),
        ({4: "0.000002", 6: ""}, None, None),  # tiny but positive: read as given
        ({4: "20000"}, "input_usd_per_mtok", "per token or per thousand"),
        ({6: "3"}, "cached_input_usd_per_mtok", "at most the input price"),
        ({7: "1.5"}, "batch_discount", "from 0 to under 1"),
        ({8: "2.5"}, "rpm", "whole number"),
        ({3: "llama-9"}, "catalog_model", "planner catalog model"),
        ({3: "Llama-3.1-8B"}, "catalog_model", "planner catalog model"),  # strict: canonical
        ({0: "Open AI"}, "provider", "lower-case"),
        ({1: "gpt x"}, "offer", "as providers write them"),
        ({11: "EUR"}, "currency", "USD"),
        ({12: "example.com"}, "source_url", "https://"),
        ({13: "20/11/2026"}, "source_date", "ISO date"),
        ({14: ""}, "provenance", "got a blank"),
    ],
)
def test_a_bad_value_names_file_row_line_and_column(
    write: WriteFile, cells: dict[int, str], column: str | None, expected: str | None
) -> None:
    values = GOOD_ROW.rstrip("\n").split(",")
    for index, value in cells.items():
        values[index] = value
    path = write("bad.csv", HEADER + GOOD_ROW.replace("gpt-x", "gpt-y") + ",".join(values) + "\n")
    if column is None:
        assert len(_read(path)) == 2
        return
    with pytest.raises(InputFileError) as info:
        _read(path)
    message = str(info.value)
    assert message.startswith(f"{path}: row 2, line 3, column {column!r}: "), message
    assert expected is not None and expected in message


def test_a_repeated_offer_names_both_rows(write: WriteFile) -> None:
    path = write("twice.csv", HEADER + GOOD_ROW + GOOD_ROW.replace("gpt-x,gpt-x", "GPT-X,gpt-x"))
    with pytest.raises(
        InputFileError, match=r"row 2, line 3, column 'offer': the same offer as row 1"
    ):
        _read(path)


def test_header_problems(write: WriteFile) -> None:
    with pytest.raises(InputFileError, match=r"column 'price': unknown column"):
        _read(write("a.csv", HEADER.rstrip("\n") + ",price\n"))
    with pytest.raises(InputFileError, match=r"missing column\(s\) 'source_url'"):
        _read(write("b.csv", HEADER.replace(",source_url", "")))


def test_a_user_row_fills_blanks_from_the_catalog(write: WriteFile) -> None:
    path = write(
        "mine.csv",
        "provider,offer,input_usd_per_mtok,output_usd_per_mtok,batch_discount\n"
        "MyHost,meta-llama/Llama-3.1-8B-Instruct-FP8,0.05,0.08,25%\n",
    )
    _, rows = read_csv(path)
    (price,) = parse_api_rows(
        path,
        rows,
        defaults={"source_url": "user sheet mine.csv", "source_date": "2026-12-01"},
        strict=False,
    )
    assert (price.provider, price.model, price.catalog_model) == (
        "myhost",
        "meta-llama/Llama-3.1-8B-Instruct-FP8",
        "llama-3.1-8b",
    )
    assert price.batch_discount == 0.25 and price.source_date == "2026-12-01"


# -- cost --------------------------------------------------------------------------------------


def test_cost_bills_input_cached_and_output_tokens() -> None:
    price = _price()
    assert cost_usd(price, 1_000_000, 0) == pytest.approx(2.0)
    assert cost_usd(price, 0, 1_000_000) == pytest.approx(8.0)
    # 3 M input of which 1 M cached, 0.5 M output: 2 x 2 + 1 x 0.5 + 0.5 x 8
    assert cost_usd(price, 3e6, 5e5, 1e6) == pytest.approx(8.5)
    assert cost_usd(price, 3e6, 5e5, 1e6, batch=True) == pytest.approx(4.25)
    # no cached price: cached tokens are billed as input
    plain = _price(cached_input_usd_per_mtok=None)
    assert cost_usd(plain, 3e6, 0, 1e6) == pytest.approx(cost_usd(plain, 3e6, 0))


def test_cost_refuses_impossible_counts_and_unknown_batch_prices() -> None:
    with pytest.raises(UsageError, match="cannot be more"):
        cost_usd(_price(), 10, 0, 11)
    with pytest.raises(UsageError, match="output tokens: expected a count of 0 or more"):
        cost_usd(_price(), 10, -1)
    with pytest.raises(UsageError, match="no batch price is known"):
        cost_usd(_price(batch_discount=None), 10, 10, batch=True)


def test_a_log_of_gpt_4o_mini_costs_what_openai_bills(prices: list[TokenPrice]) -> None:
    (openai,) = api_prices_for("gpt-4o-mini-2024-07-18", prices, provider="openai")
    # 1,000 requests of 1,200 prompt tokens (400 cached) and 300 completion tokens
    usd = cost_usd(openai, 1_200_000, 300_000, 400_000)
    assert usd == pytest.approx(0.8 * 0.15 + 0.4 * 0.075 + 0.3 * 0.6)


# -- matching log names ------------------------------------------------------------------------


def _offers(name: str, prices: list[TokenPrice]) -> list[tuple[str, str]]:
    return [(p.provider, p.offer) for p in api_prices_for(name, prices)]


def test_a_dated_openai_name_matches_its_model(prices: list[TokenPrice]) -> None:
    found = _offers("gpt-4o-mini-2024-07-18", prices)
    assert set(found) == {("openai", "gpt-4o-mini"), ("azure", "gpt-4o-mini")}
    assert ("openai", "gpt-4o") not in found  # gpt-4o is another model
    assert _offers("openai/gpt-4o-mini", prices)[0] == ("openai", "gpt-4o-mini")
    assert _offers("azure/gpt-4o-mini", prices)[0] == ("azure", "gpt-4o-mini")


def test_an_open_weights_log_name_matches_its_catalog_models_hosts(
    prices: list[TokenPrice],
) -> None:
    found = api_prices_for("meta-llama/Llama-3.1-8B-Instruct-Turbo", prices)
    assert found and {p.catalog_model for p in found} == {"llama-3.1-8b"}
    assert {p.provider for p in found} >= {"deepinfra", "fireworks", "bedrock"}
    # the offer as a host names it comes first, and its own route picks its host
    exact = api_prices_for("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", prices)
    assert (exact[0].provider, exact[0].offer) == (
        "deepinfra",
        "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    )
    routed = api_prices_for("together_ai/openai/gpt-oss-120b", prices)
    assert routed[0].provider == "together" and len(routed) > 1


def test_claude_names_match_across_anthropic_and_bedrock_spellings(
    prices: list[TokenPrice],
) -> None:
    for name in (
        "claude-3-5-sonnet-20241022",
        "claude-3.5-sonnet",
        "claude-3-5-sonnet-latest",
        "us.anthropic.claude-3-5-sonnet-20241022-v2:0",
    ):
        assert _offers(name, prices) == [
            ("bedrock", "anthropic.claude-3-5-sonnet-20241022-v2:0")
        ], name
    assert set(_offers("claude-sonnet-4-5-20250929", prices)) == {
        ("anthropic", "claude-sonnet-4-5"),
        ("bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
    }
    assert _offers("claude-sonnet-4-6", prices) == [("anthropic", "claude-sonnet-4-6")]


def test_unknown_names_match_nothing(prices: list[TokenPrice]) -> None:
    assert api_prices_for("my-finetune-v7", prices) == []
    assert api_prices_for("  ", prices) == []
    assert api_prices_for("gpt-4o-mini", prices, provider="groq") == []


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("GPT-4.1-mini-2025-04-14", "gpt-4-1-mini"),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku"),
        ("claude-3-5-haiku@20241022", "claude-3-5-haiku"),
        ("gemini/gemini-2.5-pro", "gemini-2-5-pro"),
        ("o4-mini", "o4-mini"),
    ],
)
def test_model_keys(name: str, key: str) -> None:
    assert model_key(name) == key
