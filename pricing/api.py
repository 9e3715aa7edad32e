"""Per-token API prices: what a hosted model charges per million tokens, with where it says so.

A :class:`TokenPrice` is one offer of one provider (``gpt-4o-mini`` on OpenAI,
``meta-llama/Llama-3.3-70B-Instruct-Turbo`` on DeepInfra): input, output and cached-input USD per
million tokens, the batch API's discount, published rate limits and context window where stated,
and the source URL and date of the figures. The bundled snapshot
(``data/prices/api_prices_snapshot.csv``, built by ``data/prices/build_api_snapshot.py``) is
read by :func:`load_api_snapshot`; :func:`api_prices_for` finds the offers serving a model as a
request log or the planner catalog names it; :func:`cost_usd` bills tokens at a price.

Pure: no store, no CLI. :mod:`pricing.api_sheets` versions these prices in the store, and reads
user sheets with :func:`parse_api_rows`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from planner.errors import InputFileError, RowProblem, UsageError
from planner.paths import data_dir
from pricing.snapshot import RawRow, check_header, iso_date, read_csv

API_SNAPSHOT_FILE = "api_prices_snapshot.csv"
TOKENS_PER_PRICE_UNIT = 1_000_000  # prices are USD per million tokens

#: The columns of an API price sheet, in the order the snapshot writes them.
API_COLUMNS: tuple[str, ...] = (
    "provider",
    "offer",
    "model",
    "catalog_model",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "cached_input_usd_per_mtok",
    "batch_discount",
    "rpm",
    "tpm",
    "context_tokens",
    "currency",
    "source_url",
    "source_date",
    "provenance",
    "notes",
)
#: The columns a user's API sheet must have; the others default (see :mod:`pricing.api_sheets`).
API_USER_REQUIRED = ("provider", "offer", "input_usd_per_mtok", "output_usd_per_mtok")
#: Free-text columns a user sheet may carry besides ``notes``; they are read past.
IGNORED_COLUMNS = ("note", "comment", "comments")
NUMBER_COLUMNS = (
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "cached_input_usd_per_mtok",
    "batch_discount",
    "rpm",
    "tpm",
    "context_tokens",
)
#: Longest text of each column (the store's column lengths; longer is refused, not cut).
TEXT_LIMITS = {
    "provider": 32,
    "offer": 200,
    "model": 100,
    "catalog_model": 64,
    "currency": 3,
    "source_url": 1_000,
    "provenance": 1_000,
    "notes": 1_000,
}
#: Sanity bounds: a price sheet never holds more (refused as a wrong value, never stored).
MAX_USD_PER_MTOK = 10_000.0
MAX_COUNT = 10**12

# A provider as the sheets name it: lower-case ASCII, e.g. openai, bedrock, together.
_PROVIDER = re.compile(r"[a-z0-9][a-z0-9._-]*")
# An offer or model id as providers write them: meta-llama/Llama-3.3-70B-Instruct-Turbo,
# anthropic.claude-3-5-haiku-20241022-v1:0, claude-3-5-haiku@20241022.
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
_IDENT_EXPECTED = (
    "expected a name as providers write them: ASCII letters and digits, then also . - _ / : @ + "
    "(e.g. gpt-4o-mini, meta-llama/Llama-3.3-70B-Instruct-Turbo)"
)

#: Known providers, for filters' suggestions and the docs (a user sheet may name others).
KNOWN_PROVIDERS = (
    "openai",
    "anthropic",
    "google",
    "azure",
    "bedrock",
    "together",
    "fireworks",
    "groq",
    "deepinfra",
)


@dataclass(frozen=True)
class TokenPrice:
    """One provider's price for one model offer, USD per million tokens.

    ``offer`` is the model id as the provider's API names it; ``model`` the model it is (what a
    log's name is matched against); ``catalog_model`` the planner catalog model it serves, or
    ``None`` for a proprietary model. ``batch_discount`` is the share the batch API takes off
    (0.5 = half price), ``None`` where no batch price is known. Unknown is ``None``, never 0.
    """

    provider: str
    offer: str
    model: str
    catalog_model: str | None
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    cached_input_usd_per_mtok: float | None
    batch_discount: float | None
    rpm: int | None
    tpm: int | None
    context_tokens: int | None
    source_url: str
    source_date: str  # ISO date of the figures
    provenance: str = ""  # how the figures reached the sheet (a second-hand source, a file)
    notes: str = ""
    currency: str = "USD"

    def key(self) -> tuple[str, str]:
        """What identifies a price across sheet versions: the provider and its offer id."""
        return (self.provider, self.offer)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def api_snapshot_path() -> Path:
    """The bundled snapshot: ``data/prices/api_prices_snapshot.csv`` (``$PLANNER_DATA_DIR``)."""
    return data_dir() / "prices" / API_SNAPSHOT_FILE


# -- reading sheets ----------------------------------------------------------------------------

#: Text of a number cell -> plain ``1234.5`` text; :class:`ValueError` ``(expected, why)`` when
#: it is not one (user sheets pass :func:`pricing.sheets.number_text` for their separators).
NumberText = Callable[[str], str]


def _plain_number(text: str) -> str:
    value = text.strip().removeprefix("$").strip()
    if not value:
        return ""
    try:
        float(value)
    except ValueError:
        raise ValueError("expected a number with a decimal point, e.g. 0.15", "") from None
    return value


def check_api_header(path: Path, header: Sequence[str], *, required: Iterable[str]) -> None:
    """Every required column present; no unknown or repeated column (an API sheet's)."""
    check_header(path, header, required=required, columns=API_COLUMNS, ignored=IGNORED_COLUMNS)


class _Cells:
    """Reads the cells of one row, raising a located error for the first bad one."""

    def __init__(
        self, path: Path, raw: RawRow, defaults: Mapping[str, str], number_text: NumberText
    ) -> None:
        self.path = path
        self.raw = raw
        self.defaults = defaults
        self.number_text = number_text

    def fail(self, column: str | None, message: str) -> InputFileError:
        return InputFileError(self.path, RowProblem(self.raw.row, column, message, self.raw.line))

    def text(self, column: str) -> str:
        value = (self.raw.values.get(column) or "").strip()
        value = value or self.defaults.get(column, "")
        limit = TEXT_LIMITS.get(column)
        if limit is not None and len(value) > limit:
            raise self.fail(column, f"at most {limit} characters, got {len(value):,}")
        if not value.isprintable():
            raise self.fail(column, f"control characters in {value[:80]!r}")
        return value

    def required(self, column: str) -> str:
        value = self.text(column)
        if not value:
            raise self.fail(column, "expected a value, got a blank")
        return value

    def ident(self, column: str) -> str:
        value = self.required(column)
        if not _IDENT.fullmatch(value):
            raise self.fail(column, f"{_IDENT_EXPECTED}; got {value[:80]!r}")
        return value

    def number(self, column: str) -> float | None:
        text = self.text(column)
        percent = column == "batch_discount" and text.endswith("%")
        # a workbook's numeric cells are numbers already: never read with a locale's separators
        native = column in getattr(self.raw, "native", ())
        number_text = _plain_number if native else self.number_text
        try:
            plain = number_text(text.removesuffix("%") if percent else text)
        except ValueError as exc:
            expected, why = exc.args
            message = f"{expected}, got {text!r}" + (f": {why}" if why else "")
            raise self.fail(column, message) from None
        if not plain:
            return None
        value = float(plain)
        if not math.isfinite(value):
            raise self.fail(column, f"expected a finite number, got {text!r}")
        return value / 100.0 if percent else value

    def price(self, column: str, *, required: bool) -> float | None:
        value = self.number(column)
        if value is None:
            if required:
                raise self.fail(column, "expected a price in USD per million tokens, got a blank")
            return None
        if value <= 0 and required:
            raise self.fail(
                column,
                f"expected a positive price in USD per million tokens, got {value:g} (an "
                "unknown price is left out, never 0)",
            )
        if value < 0:
            raise self.fail(
                column, f"expected a price of 0 or more (blank if unknown), got {value:g}"
            )
        if value > MAX_USD_PER_MTOK:
            raise self.fail(
                column,
                f"expected USD per million tokens (at most {MAX_USD_PER_MTOK:,.0f}), got "
                f"{value:g}: is it a price per token or per thousand tokens?",
            )
        return value

    def count(self, column: str) -> int | None:
        value = self.number(column)
        if value is None:
            return None
        if value != int(value) or not 1 <= value <= MAX_COUNT:
            raise self.fail(column, f"expected a whole number of at least 1, got {value:g}")
        return int(value)


def parse_api_row(
    path: Path,
    raw: RawRow,
    *,
    defaults: Mapping[str, str],
    catalog: Mapping[str, str],
    strict: bool,
    known: Callable[[str, str], TokenPrice | None] | None = None,
    number_text: NumberText = _plain_number,
) -> TokenPrice:
    """One :class:`TokenPrice` from one row.

    ``catalog``: lower-cased catalog model names and aliases -> canonical names. ``strict``
    (the bundled snapshot): ``catalog_model`` must be a canonical name and the source URL,
    date and provenance given. ``known(provider, offer)``: a price already in force, whose
    model and catalog model fill a user row's blanks.
    """
    r = _Cells(path, raw, defaults, number_text)
    provider = r.required("provider")
    if provider != provider.lower() or not _PROVIDER.fullmatch(provider):
        if strict or not _PROVIDER.fullmatch(provider.lower()):
            raise r.fail(
                "provider",
                "expected a provider in lower-case ASCII letters, digits, . - _ (e.g. "
                f"{', '.join(KNOWN_PROVIDERS[:4])}); got {provider[:80]!r}",
            )
        provider = provider.lower()
    offer = r.ident("offer")
    before = known(provider, offer) if known is not None else None
    # a blank model: the known offer's, else the offer id itself (its catalog model is then
    # found from the id: llama-3.1-8b-fp8 serves llama-3.1-8b)
    model_text = r.text("model") or (before.model if before is not None else offer)
    if not _IDENT.fullmatch(model_text):
        raise r.fail("model", f"{_IDENT_EXPECTED}; got {model_text[:80]!r}")
    catalog_text = r.text("catalog_model")
    catalog_model: str | None
    if catalog_text:
        catalog_model = catalog.get(catalog_text.lower())
        if catalog_model is None or (strict and catalog_model != catalog_text):
            raise r.fail(
                "catalog_model",
                f"expected a planner catalog model (see `planner catalog models`) or a blank "
                f"for a proprietary model, got {catalog_text[:80]!r}",
            )
    elif strict:
        catalog_model = None
    elif before is not None and before.model == model_text:
        catalog_model = before.catalog_model
    else:
        catalog_model = catalog_model_of_name(model_text, catalog)

    input_price = r.price("input_usd_per_mtok", required=True)
    output_price = r.price("output_usd_per_mtok", required=True)
    cached = r.price("cached_input_usd_per_mtok", required=False)
    assert input_price is not None and output_price is not None
    if cached is not None and cached > input_price:
        raise r.fail(
            "cached_input_usd_per_mtok",
            f"expected a cached-input price at most the input price ({input_price:g}), got "
            f"{cached:g}",
        )
    discount = r.number("batch_discount")
    if discount is not None and not 0 <= discount < 1:
        raise r.fail(
            "batch_discount",
            f"expected the share the batch API takes off, from 0 to under 1 (0.5 or 50% = half "
            f"price), got {r.text('batch_discount')!r}",
        )
    rpm = r.count("rpm")
    tpm = r.count("tpm")
    context = r.count("context_tokens")
    currency = (r.text("currency") or "USD").upper()
    if currency != "USD":
        raise r.fail("currency", f"prices must be in USD, got {r.text('currency')!r}")
    source_url = r.required("source_url")
    if strict and not source_url.startswith("https://"):
        raise r.fail("source_url", f"expected the https:// URL of the price, got {source_url!r}")
    source_date = iso_date(r, "source_date")
    provenance = r.required("provenance") if strict else r.text("provenance")
    return TokenPrice(
        provider=provider,
        offer=offer,
        model=model_text,
        catalog_model=catalog_model,
        input_usd_per_mtok=input_price,
        output_usd_per_mtok=output_price,
        cached_input_usd_per_mtok=cached,
        batch_discount=discount,
        rpm=rpm,
        tpm=tpm,
        context_tokens=context,
        source_url=source_url,
        source_date=source_date,
        provenance=provenance,
        notes=r.text("notes"),
        currency=currency,
    )


def parse_api_rows(
    path: Path,
    rows: Iterable[RawRow],
    *,
    defaults: Mapping[str, str],
    strict: bool,
    known: Callable[[str, str], TokenPrice | None] | None = None,
    number_text: NumberText = _plain_number,
) -> list[TokenPrice]:
    """Parse rows into prices (see :func:`parse_api_row`); an offer given twice is an error
    naming both rows."""
    catalog = catalog_keys()
    prices: list[TokenPrice] = []
    first_row: dict[tuple[str, str], int] = {}
    for raw in rows:
        price = parse_api_row(
            path,
            raw,
            defaults=defaults,
            catalog=catalog,
            strict=strict,
            known=known,
            number_text=number_text,
        )
        key = (price.provider, price.offer.lower())
        if key in first_row:
            raise InputFileError(
                path,
                RowProblem(
                    raw.row,
                    "offer",
                    f"the same offer as row {first_row[key]} ({price.provider} "
                    f"{price.offer!r} given twice)",
                    raw.line,
                ),
            )
        first_row[key] = raw.row
        prices.append(price)
    return prices


def load_api_snapshot(path: Path | None = None) -> list[TokenPrice]:
    """Every price of the bundled API snapshot (or of ``path`` in the same layout), strictly:
    every column present, catalog models by their canonical names, a source URL, date and
    provenance on every row."""
    if path is None:
        return list(_bundled_snapshot(api_snapshot_path()))
    return _read_snapshot(path)


@functools.cache
def _bundled_snapshot(path: Path) -> tuple[TokenPrice, ...]:
    return tuple(_read_snapshot(path))


def _read_snapshot(path: Path) -> list[TokenPrice]:
    header, rows = read_csv(path)
    check_api_header(path, header, required=API_COLUMNS)
    prices = parse_api_rows(path, rows, defaults={}, strict=True)
    if not prices:
        raise InputFileError(path, "no price rows under the header")
    return prices


# -- matching a log's model names --------------------------------------------------------------

# Routing prefixes of gateways (LiteLLM, OpenRouter) before the provider's own id.
_ROUTE = re.compile(
    r"^(openai|azure|azure_ai|anthropic|bedrock|bedrock_converse|gemini|google|vertex_ai|"
    r"together_ai|together|fireworks_ai|fireworks|groq|deepinfra)/"
)
# The provider each gateway route names (LiteLLM's provider names -> the sheets').
_ROUTE_PROVIDER = {
    "azure_ai": "azure",
    "bedrock_converse": "bedrock",
    "gemini": "google",
    "vertex_ai": "google",
    "together_ai": "together",
    "fireworks_ai": "fireworks",
}
# Bedrock's cross-region inference prefixes and vendor prefix: us.anthropic.claude-...
_BEDROCK_PREFIX = re.compile(r"^((us|eu|apac|au|jp|ca|global|us-gov)\.)?[a-z0-9]+\.(?=[a-z])")
# A snapshot date or version tag at the end of a proprietary model's id.
_DATED = re.compile(r"(-v\d+(:\d+)?|:\d+|-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-latest|-\d{4})$")


def model_key(name: str) -> str:
    """A model or offer name reduced for matching: lower-case, without a gateway route
    (``openai/``), Bedrock region and vendor prefixes (``us.anthropic.``), snapshot dates and
    version tags (``-2024-07-18``, ``-20241022-v2:0``, ``-latest``); dots as dashes, so
    ``claude-3.5-sonnet`` and ``claude-3-5-sonnet`` meet."""
    key = name.strip().lower()
    key = _ROUTE.sub("", key)
    if "/" not in key:
        key = _BEDROCK_PREFIX.sub("", key) if key.count(".") >= 1 and "-" in key else key
    while (m := _DATED.search(key)) is not None and m.start() > 0:
        key = key[: m.start()]
    return key.replace(".", "-")


def catalog_keys() -> dict[str, str]:
    """Lower-cased catalog model names and aliases -> canonical names."""
    from planner.workload.model_names import _catalog_keys  # the catalog: only when matching

    return _catalog_keys()


def catalog_model_of_name(name: str, keys: Mapping[str, str] | None = None) -> str | None:
    """The catalog model a log's model name is (:func:`planner.workload.model_names.
    catalog_model_of`), also through a gateway route prefix; ``None`` for none."""
    from planner.workload.model_names import catalog_model_of

    keys = keys if keys is not None else catalog_keys()
    found = catalog_model_of(name, keys)
    if found is None:
        routed = _ROUTE.sub("", name.strip().lower())
        found = catalog_model_of(routed, keys) if routed != name.strip().lower() else None
    return found


def api_prices_for(
    model_name: str,
    prices: Sequence[TokenPrice] | None = None,
    *,
    provider: str | None = None,
) -> list[TokenPrice]:
    """The offers serving ``model_name`` as a log or the catalog names it, best match first:
    offers whose id is the name (``gpt-4o-mini``, ``meta-llama/Llama-3.3-70B-Instruct-Turbo``),
    then offers of the same model (``gpt-4o-mini-2024-07-18`` is ``gpt-4o-mini``;
    ``claude-3-5-sonnet-20241022`` is Bedrock's ``anthropic.claude-3-5-sonnet-20241022-v2:0``),
    then every offer of the catalog model the name maps to (``meta-llama/Llama-3.1-8B-Instruct-
    Turbo`` is ``llama-3.1-8b``). Within each, by provider then input price. ``prices``: the
    prices to search (default: the bundled snapshot); ``provider``: only that provider's."""
    pool = list(prices) if prices is not None else load_api_snapshot()
    if provider is not None:
        wanted = provider.strip().lower()
        pool = [p for p in pool if p.provider == wanted]
    name = model_name.strip()
    if not name:
        return []
    lowered = name.lower()
    routed = _ROUTE.sub("", lowered)
    route = lowered[: len(lowered) - len(routed)].rstrip("/")
    route_provider = _ROUTE_PROVIDER.get(route, route)
    key = model_key(name)
    catalog = catalog_model_of_name(name)

    def rank(price: TokenPrice) -> int | None:
        offer = price.offer.lower()
        if offer == routed and route and price.provider == route_provider:
            return 0  # together_ai/openai/gpt-oss-120b: Together's offer, named with its route
        if offer in (lowered, routed):
            return 1
        if key and key in (model_key(price.model), model_key(price.offer)):
            return 2
        if catalog is not None and price.catalog_model == catalog:
            return 3
        return None

    ranked = [(r, p) for p in pool if (r := rank(p)) is not None]
    ranked.sort(key=lambda rp: (rp[0], rp[1].provider, rp[1].input_usd_per_mtok, rp[1].offer))
    return [p for _, p in ranked]


# -- billing -----------------------------------------------------------------------------------


def cost_usd(
    price: TokenPrice,
    input_tokens: float,
    output_tokens: float,
    cached_input_tokens: float = 0,
    *,
    batch: bool = False,
) -> float:
    """What ``price`` bills for the tokens, in USD.

    ``input_tokens`` counts every prompt token, the cached ones included (as OpenAI's and
    Anthropic's usage reports do); ``cached_input_tokens`` of them are billed at the cached-input
    price (at the input price where the offer has none). ``batch``: through the batch API, its
    discount off the whole bill (an error where no batch price is known).
    """
    for what, value in (
        ("input tokens", input_tokens),
        ("output tokens", output_tokens),
        ("cached input tokens", cached_input_tokens),
    ):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{what}: expected a count of 0 or more, got {value!r}")
    if cached_input_tokens > input_tokens:
        raise UsageError(
            f"cached input tokens ({cached_input_tokens:,.0f}) are part of the input tokens "
            f"({input_tokens:,.0f}), so cannot be more"
        )
    cached_rate = (
        price.cached_input_usd_per_mtok
        if price.cached_input_usd_per_mtok is not None
        else price.input_usd_per_mtok
    )
    usd = (
        (input_tokens - cached_input_tokens) * price.input_usd_per_mtok
        + cached_input_tokens * cached_rate
        + output_tokens * price.output_usd_per_mtok
    ) / TOKENS_PER_PRICE_UNIT
    if batch:
        if price.batch_discount is None:
            raise UsageError(
                f"{price.provider} {price.offer}: no batch price is known (no batch_discount)"
            )
        usd *= 1.0 - price.batch_discount
    return usd


def sort_key(price: TokenPrice) -> tuple[Any, ...]:
    """Listing order: by model, then provider, then input price."""
    return (price.model.lower(), price.provider, price.input_usd_per_mtok, price.offer.lower())
