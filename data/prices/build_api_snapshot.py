"""Build ``api_prices_snapshot.csv`` (per-token API prices) from the bundled LiteLLM extract.

    python data/prices/build_api_snapshot.py            # rewrite the CSV from the extract
    python data/prices/build_api_snapshot.py --extract PATH/model_prices_and_context_window.json
                                                        # rewrite the extract from a full file too

The extract (``sources/litellm_1.110.2_model_prices_extract.json``) holds the rows of LiteLLM's
``model_prices_and_context_window.json`` named in :data:`OFFERS` below, unchanged; the CSV is
derived from it deterministically (a test checks it reproduces the bundled file byte for byte).
Prices per token become USD per million tokens; the batch discount is the share the provider's
batch API takes off (from LiteLLM's ``*_batches`` prices, or the provider's batch page where
LiteLLM has none: OpenAI and Anthropic, 50 %). Offers LiteLLM marks as deprecated before the
snapshot's date are left out: their price is no longer one you can buy.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from pricing.api import API_COLUMNS

HERE = Path(__file__).resolve().parent
EXTRACT = HERE / "sources" / "litellm_1.110.2_model_prices_extract.json"
OUTPUT = HERE / "api_prices_snapshot.csv"

LITELLM_VERSION = "1.110.2"
SOURCE_DATE = "2026-11-20"  # PyPI upload of litellm 1.110.2 (2026-11-20T04:05Z)
PROVENANCE = (
    f"via BerriAI/litellm model_prices_and_context_window.json as shipped in litellm "
    f"{LITELLM_VERSION} on PyPI (litellm/model_prices_and_context_window_backup.json, uploaded "
    f"{SOURCE_DATE}; MIT)"
)

#: The provider's pricing page where LiteLLM's row names none.
PRICING_PAGES = {
    "openai": "https://openai.com/api/pricing/",
    "anthropic": "https://www.anthropic.com/pricing#api",
    "google": "https://ai.google.dev/gemini-api/docs/pricing",
    "azure": "https://azure.microsoft.com/en-us/pricing/details/cognitive-services/openai-service/",
    "bedrock": "https://aws.amazon.com/bedrock/pricing/",
    "together": "https://www.together.ai/pricing",
    "fireworks": "https://fireworks.ai/pricing",
    "groq": "https://groq.com/pricing",
    "deepinfra": "https://deepinfra.com/pricing",
}
#: Batch APIs LiteLLM gives no batch price for, with the provider's page that states the discount.
BATCH_PAGES = {
    "openai": ("0.5", "https://platform.openai.com/docs/guides/batch"),
    "anthropic": ("0.5", "https://docs.anthropic.com/en/docs/build-with-claude/batch-processing"),
}

#: (LiteLLM key, provider, offer id as the provider's API names it, model, planner catalog model
#: or "" for a proprietary model). ``model`` is what a log's name is matched against (after its
#: date or version suffix is dropped); open-weights rows name the catalog model they serve.
OFFERS: tuple[tuple[str, str, str, str, str], ...] = (
    # OpenAI
    ("gpt-4o", "openai", "gpt-4o", "gpt-4o", ""),
    ("gpt-4o-2024-05-13", "openai", "gpt-4o-2024-05-13", "gpt-4o-2024-05-13", ""),
    ("gpt-4o-mini", "openai", "gpt-4o-mini", "gpt-4o-mini", ""),
    ("gpt-4.1", "openai", "gpt-4.1", "gpt-4.1", ""),
    ("gpt-4.1-mini", "openai", "gpt-4.1-mini", "gpt-4.1-mini", ""),
    ("gpt-4.1-nano", "openai", "gpt-4.1-nano", "gpt-4.1-nano", ""),
    ("o3-mini", "openai", "o3-mini", "o3-mini", ""),
    ("o4-mini", "openai", "o4-mini", "o4-mini", ""),
    # Anthropic (the Claude 3.x and 4.0 models are sold through Bedrock below)
    ("claude-haiku-4-5", "anthropic", "claude-haiku-4-5", "claude-haiku-4-5", ""),
    ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5", ""),
    ("claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6", "claude-sonnet-4-6", ""),
    ("claude-opus-4-5", "anthropic", "claude-opus-4-5", "claude-opus-4-5", ""),
    ("claude-opus-4-6", "anthropic", "claude-opus-4-6", "claude-opus-4-6", ""),
    ("claude-opus-4-7", "anthropic", "claude-opus-4-7", "claude-opus-4-7", ""),
    # Google Gemini API
    ("gemini/gemini-2.5-flash", "google", "gemini-2.5-flash", "gemini-2.5-flash", ""),
    (
        "gemini/gemini-2.5-flash-lite",
        "google",
        "gemini-2.5-flash-lite",
        "gemini-2.5-flash-lite",
        "",
    ),
    ("gemini/gemini-2.5-pro", "google", "gemini-2.5-pro", "gemini-2.5-pro", ""),
    # Azure OpenAI (global standard deployments)
    ("azure/gpt-4o", "azure", "gpt-4o", "gpt-4o", ""),
    ("azure/gpt-4o-mini", "azure", "gpt-4o-mini", "gpt-4o-mini", ""),
    ("azure/gpt-4.1", "azure", "gpt-4.1", "gpt-4.1", ""),
    ("azure/gpt-4.1-mini", "azure", "gpt-4.1-mini", "gpt-4.1-mini", ""),
    ("azure/o4-mini", "azure", "o4-mini", "o4-mini", ""),
    # AWS Bedrock: Claude (on-demand, in-region model ids)
    *(
        (key, "bedrock", key, model, "")
        for key, model in (
            ("anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku"),
            ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
            ("anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
            ("anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
            ("anthropic.claude-opus-4-20250514-v1:0", "claude-opus-4"),
            ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
            ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
            ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        )
    ),
    # AWS Bedrock: open-weights models
    *(
        (key, "bedrock", key, model, catalog)
        for key, model, catalog in (
            ("meta.llama3-1-8b-instruct-v1:0", "llama-3.1-8b", "llama-3.1-8b"),
            ("meta.llama3-1-70b-instruct-v1:0", "llama-3.1-70b", "llama-3.1-70b"),
            ("meta.llama3-1-405b-instruct-v1:0", "llama-3.1-405b", "llama-3.1-405b"),
            ("meta.llama3-3-70b-instruct-v1:0", "llama-3.3-70b", "llama-3.1-70b"),
            ("meta.llama4-scout-17b-instruct-v1:0", "llama-4-scout", "llama-4-scout"),
            ("meta.llama4-maverick-17b-instruct-v1:0", "llama-4-maverick", "llama-4-maverick"),
            ("mistral.mistral-7b-instruct-v0:2", "mistral-7b", "mistral-7b"),
            ("mistral.mixtral-8x7b-instruct-v0:1", "mixtral-8x7b", "mixtral-8x7b"),
            ("openai.gpt-oss-20b-1:0", "gpt-oss-20b", "gpt-oss-20b"),
            ("openai.gpt-oss-120b-1:0", "gpt-oss-120b", "gpt-oss-120b"),
            ("qwen.qwen3-32b-v1:0", "qwen3-32b", "qwen3-32b"),
            ("qwen.qwen3-235b-a22b-2507-v1:0", "qwen3-235b-a22b", "qwen3-235b-a22b"),
            ("google.gemma-3-27b-it", "gemma-3-27b", "gemma-3-27b"),
        )
    ),
    # Together AI
    *(
        (f"together_ai/{offer}", "together", offer, model, catalog)
        for offer, model, catalog in (
            ("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "llama-3.1-8b", "llama-3.1-8b"),
            ("meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", "llama-3.1-70b", "llama-3.1-70b"),
            ("meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b", "llama-3.1-405b"),
            ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "llama-3.3-70b", "llama-3.1-70b"),
            ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout", "llama-4-scout"),
            ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b", "mistral-7b"),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", "mixtral-8x7b"),
            ("Qwen/Qwen2.5-72B-Instruct-Turbo", "qwen2.5-72b", "qwen2.5-72b"),
            ("deepseek-ai/DeepSeek-V3", "deepseek-v3", "deepseek-v3"),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", "deepseek-r1"),
            ("openai/gpt-oss-20b", "gpt-oss-20b", "gpt-oss-20b"),
            ("openai/gpt-oss-120b", "gpt-oss-120b", "gpt-oss-120b"),
        )
    ),
    # Fireworks AI
    *(
        (f"fireworks_ai/{offer}", "fireworks", offer, model, catalog)
        for offer, model, catalog in (
            ("accounts/fireworks/models/llama-v3p1-8b-instruct", "llama-3.1-8b", "llama-3.1-8b"),
            ("accounts/fireworks/models/llama-v3p1-70b-instruct", "llama-3.1-70b", "llama-3.1-70b"),
            (
                "accounts/fireworks/models/llama-v3p1-405b-instruct",
                "llama-3.1-405b",
                "llama-3.1-405b",
            ),
            ("accounts/fireworks/models/llama-v3p3-70b-instruct", "llama-3.3-70b", "llama-3.1-70b"),
            (
                "accounts/fireworks/models/llama4-scout-instruct-basic",
                "llama-4-scout",
                "llama-4-scout",
            ),
            (
                "accounts/fireworks/models/llama4-maverick-instruct-basic",
                "llama-4-maverick",
                "llama-4-maverick",
            ),
            ("accounts/fireworks/models/mixtral-8x7b-instruct", "mixtral-8x7b", "mixtral-8x7b"),
            ("accounts/fireworks/models/qwen2p5-72b-instruct", "qwen2.5-72b", "qwen2.5-72b"),
            ("accounts/fireworks/models/qwen3-8b", "qwen3-8b", "qwen3-8b"),
            ("accounts/fireworks/models/qwen3-32b", "qwen3-32b", "qwen3-32b"),
            ("accounts/fireworks/models/qwen3-235b-a22b", "qwen3-235b-a22b", "qwen3-235b-a22b"),
            ("accounts/fireworks/models/deepseek-v3", "deepseek-v3", "deepseek-v3"),
            ("accounts/fireworks/models/deepseek-r1", "deepseek-r1", "deepseek-r1"),
            ("accounts/fireworks/models/gemma-3-27b-it", "gemma-3-27b", "gemma-3-27b"),
            ("accounts/fireworks/models/gpt-oss-20b", "gpt-oss-20b", "gpt-oss-20b"),
            ("accounts/fireworks/models/gpt-oss-120b", "gpt-oss-120b", "gpt-oss-120b"),
        )
    ),
    # Groq
    ("groq/openai/gpt-oss-20b", "groq", "openai/gpt-oss-20b", "gpt-oss-20b", "gpt-oss-20b"),
    ("groq/openai/gpt-oss-120b", "groq", "openai/gpt-oss-120b", "gpt-oss-120b", "gpt-oss-120b"),
    # DeepInfra
    *(
        (f"deepinfra/{offer}", "deepinfra", offer, model, catalog)
        for offer, model, catalog in (
            ("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "llama-3.1-8b", "llama-3.1-8b"),
            ("meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", "llama-3.1-70b", "llama-3.1-70b"),
            ("meta-llama/Llama-3.3-70B-Instruct-Turbo", "llama-3.3-70b", "llama-3.1-70b"),
            ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout", "llama-4-scout"),
            (
                "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
                "llama-4-maverick",
                "llama-4-maverick",
            ),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", "mixtral-8x7b"),
            ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b", "qwen2.5-72b"),
            ("Qwen/Qwen3-32B", "qwen3-32b", "qwen3-32b"),
            ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", "qwen3-30b-a3b"),
            ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", "qwen3-235b-a22b"),
            ("deepseek-ai/DeepSeek-V3", "deepseek-v3", "deepseek-v3"),
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", "deepseek-r1"),
            ("google/gemma-3-27b-it", "gemma-3-27b", "gemma-3-27b"),
            ("openai/gpt-oss-20b", "gpt-oss-20b", "gpt-oss-20b"),
            ("openai/gpt-oss-120b", "gpt-oss-120b", "gpt-oss-120b"),
        )
    ),
)

COLUMNS = API_COLUMNS  # one definition of an API price sheet's columns


def per_mtok(value: float | None) -> str:
    """USD per token as USD per million tokens, exactly (no float noise: 1.5e-07 -> 0.15)."""
    if value is None:
        return ""
    return format(Decimal(repr(value)) * 1_000_000, "f").rstrip("0").rstrip(".") or "0"


def batch_discount(row: dict[str, Any], provider: str) -> tuple[str, str]:
    """The share off the batch API and where it is stated: LiteLLM's batch price, else the
    provider's batch page (OpenAI, Anthropic), else unknown (blank)."""
    batch = row.get("input_cost_per_token_batches")
    if batch is not None and row.get("input_cost_per_token"):
        share = 1 - Decimal(repr(batch)) / Decimal(repr(row["input_cost_per_token"]))
        shown = format(round(share, 4).normalize(), "f")
        return shown, "batch price from LiteLLM's *_batches fields"
    if provider in BATCH_PAGES:
        share_text, page = BATCH_PAGES[provider]
        return share_text, f"batch discount from the provider's batch API page {page}"
    return "", ""


def build_rows(extract: dict[str, dict[str, Any]]) -> tuple[list[dict[str, str]], list[str]]:
    """The CSV rows, and the offers left out (deprecated before the snapshot's date)."""
    rows: list[dict[str, str]] = []
    skipped: list[str] = []
    for key, provider, offer, model, catalog in OFFERS:
        row = extract[key]
        deprecated = row.get("deprecation_date")
        if deprecated and deprecated <= SOURCE_DATE:
            skipped.append(f"{key} (deprecated {deprecated})")
            continue
        notes = []
        discount, batch_note = batch_discount(row, provider)
        if batch_note:
            notes.append(batch_note)
        if row.get("input_cost_per_token_above_200k_tokens") is not None:
            notes.append(
                "prompts over 200k tokens: "
                f"{per_mtok(row['input_cost_per_token_above_200k_tokens'])} in / "
                f"{per_mtok(row.get('output_cost_per_token_above_200k_tokens'))} out"
            )
        if row.get("rpm") is not None or row.get("tpm") is not None:
            notes.append("rpm/tpm as LiteLLM records them (limits depend on the account's tier)")
        if deprecated:
            notes.append(f"deprecation announced for {deprecated}")
        rows.append(
            {
                "provider": provider,
                "offer": offer,
                "model": model,
                "catalog_model": catalog,
                "input_usd_per_mtok": per_mtok(row["input_cost_per_token"]),
                "output_usd_per_mtok": per_mtok(row["output_cost_per_token"]),
                "cached_input_usd_per_mtok": per_mtok(row.get("cache_read_input_token_cost")),
                "batch_discount": discount,
                "rpm": str(row["rpm"]) if row.get("rpm") is not None else "",
                "tpm": str(row["tpm"]) if row.get("tpm") is not None else "",
                "context_tokens": str(row.get("max_input_tokens") or ""),
                "currency": "USD",
                "source_url": row.get("source") or PRICING_PAGES[provider],
                "source_date": SOURCE_DATE,
                "provenance": f"{PROVENANCE}, key {key!r}",
                "notes": "; ".join(notes),
            }
        )
    return rows, skipped


def render(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_extract(full: Path) -> None:
    """Keep only the rows :data:`OFFERS` names from LiteLLM's full file, unchanged."""
    data = json.loads(full.read_text(encoding="utf-8"))
    wanted = {key: data[key] for key, *_ in OFFERS}
    EXTRACT.write_text(json.dumps(wanted, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", type=Path, help="LiteLLM's full price file to extract from")
    args = parser.parse_args()
    if args.extract:
        write_extract(args.extract)
    rows, skipped = build_rows(json.loads(EXTRACT.read_text(encoding="utf-8")))
    OUTPUT.write_text(render(rows), encoding="utf-8")
    print(f"wrote {len(rows)} prices to {OUTPUT.name}")
    for item in skipped:
        print(f"left out: {item}")


if __name__ == "__main__":
    main()
