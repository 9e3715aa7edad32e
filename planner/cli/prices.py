"""``planner prices list|compare|import|diff|versions|load-snapshot|refresh``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, sessions_from, stderr, stdout, user_errors
from planner.cli.options import (
    JSON_OPTION,
    PRICE_MAX_RATIO,
    PRICE_MIN_USD_PER_HOUR,
    PRICE_SHEET_MAX_CELL_CHARS,
    PRICE_SHEET_MAX_COLUMNS,
    PRICE_SHEET_MAX_ROWS,
    PRICE_SHEET_MAX_XLSX_PART_BYTES,
)
from planner.cli.tables import Column, print_table, print_whole
from planner.common.text import printable
from pricing.model import PricePoint

if TYPE_CHECKING:
    from planner.usecases.prices import PriceImportRequest
    from pricing.api_sheets import ApiPriceEntry
    from pricing.entries import PriceEntry, SheetDiff, VersionInfo


app = typer.Typer(
    help="Cloud GPU prices: the bundled snapshot, live refreshes, your own sheets, history.",
    no_args_is_help=True,
)

OPTION_HELP = (
    "Purchase option: on-demand, spot, reserved-1y, reserved-3y, savings-plan-1y, "
    "savings-plan-3y, committed-1y, committed-3y, or a group: reserved, savings-plan, "
    "committed, commitments, all."
)


def _api_loaded(version: VersionInfo) -> None:
    stderr.print(
        f"the store had no per-token API prices: loaded the bundled API snapshot as API "
        f"version {version.id} ({version.row_count} prices)",
        markup=False,
    )


def _loaded(version: VersionInfo) -> None:
    stderr.print(
        f"the store had no prices: loaded the bundled snapshot as version {version.id} "
        f"({version.row_count} prices)",
        markup=False,
    )


def _nothing_matches(what: str) -> None:
    stderr.print(f"no {what} match these filters", markup=False)


def _money(value: float) -> str:
    return f"{value:,.4f}"


def _from(entry: PriceEntry) -> str:
    text = f"v{entry.version_id} {entry.source_kind}"
    if entry.overrides is not None:
        text += f" (list {_money(entry.overrides.usd_per_hour)})"
    return text


KIND_HELP = (
    "Which prices: instance (GPU instances per hour, the default) or api (per-token prices of "
    "hosted models: OpenAI, Anthropic, Google, Azure, Bedrock, Together, Fireworks, Groq, "
    "DeepInfra)."
)


def _usd_per_mtok(value: float | None) -> str:
    """USD per million tokens as money, with the digits that tell prices apart ($0.0375)."""
    if value is None:
        return "-"
    whole, _, cents = f"{value:,.4f}".partition(".")
    cents = cents.rstrip("0").ljust(2, "0")
    return f"${whole}.{cents}"


def _count(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _api_from(entry: ApiPriceEntry) -> str:
    text = f"v{entry.version_id} {entry.source_kind}"
    if entry.overrides is not None:
        text += f" (list {_usd_per_mtok(entry.overrides.input_usd_per_mtok)} in)"
    return text


def _list_api(ctx: typer.Context, model: str | None, provider: str | None, as_json: bool) -> None:
    from planner.usecases.prices import ApiPriceQuery, api_prices_in_force

    with sessions_from(ctx) as sessions:
        entries = api_prices_in_force(ApiPriceQuery(model, provider), sessions, loaded=_api_loaded)
    if as_json:
        if not entries:
            _nothing_matches("per-token prices")
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        stdout.print(
            "no per-token prices match these filters (see `planner prices list --kind api "
            "--model M` for the providers of a model)"
        )
        return
    prices = [e.price for e in entries]
    print_table(
        [
            Column("provider", [p.provider for p in prices]),
            # an offer id has no spaces: as a wrapping key column it keeps its whole width
            Column("offer", [printable(p.offer) for p in prices], wrap=True),
            Column("model", [printable(p.model) for p in prices], 3),
            Column("catalog model", [p.catalog_model or "-" for p in prices], 4),
            Column(
                "input /M tok", [_usd_per_mtok(p.input_usd_per_mtok) for p in prices], 0, "right"
            ),
            Column(
                "cached /M tok",
                [_usd_per_mtok(p.cached_input_usd_per_mtok) for p in prices],
                2,
                "right",
            ),
            Column(
                "output /M tok", [_usd_per_mtok(p.output_usd_per_mtok) for p in prices], 0, "right"
            ),
            Column(
                "batch off",
                [
                    f"{p.batch_discount:.0%}" if p.batch_discount is not None else "-"
                    for p in prices
                ],
                2,
                "right",
            ),
            Column("rpm", [_count(p.rpm) for p in prices], 6, "right"),
            Column("tpm", [_count(p.tpm) for p in prices], 6, "right"),
            Column("context", [_count(p.context_tokens) for p in prices], 5, "right"),
            Column("date", [p.source_date for p in prices], 1),
            Column("from", [_api_from(e) for e in entries], 7),
        ]
    )
    stdout.print(
        f"{len(entries)} per-token prices, USD per million tokens; batch off: the batch "
        "API's discount; sources and URLs: `planner prices list --kind api --json`",
        soft_wrap=False,
    )


@app.command("list")
@user_errors
def list_command(
    ctx: typer.Context,
    provider: str | None = typer.Option(
        None,
        "--provider",
        help="aws, gcp, azure or other; with --kind api: openai, anthropic, google, azure, "
        "bedrock, together, fireworks, groq, deepinfra or a provider of your sheet.",
    ),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU: catalog name, alias or family (H100 = H100-SXM and H100-PCIe)."
    ),
    region: str | None = typer.Option(None, "--region", help="Region, e.g. us-east-1."),
    option: str | None = typer.Option(None, "--option", help=OPTION_HELP),
    kind: str = typer.Option("instance", "--kind", help=KIND_HELP),
    model: str | None = typer.Option(
        None,
        "--model",
        help="With --kind api: the offers serving this model, as a log or the catalog names it "
        "(gpt-4o-mini-2024-07-18, claude-3-5-sonnet-20241022, llama-3.1-8b, "
        "meta-llama/Llama-3.1-8B-Instruct-Turbo), best match first.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """List the prices in force: the newest version's price of each instance and option, your
    own sheet's price where you imported one (--kind api: each provider's per-token price of
    each model offer). An unknown filter value is an error (exit 2) with the closest known
    values; a known one that matches nothing lists nothing."""
    from planner.errors import UsageError
    from planner.usecases.prices import PriceQuery, price_kind, prices_in_force
    from pricing.tables import option_label

    if price_kind(kind) == "api":
        given = [
            name
            for name, value in (("--gpu", gpu), ("--region", region), ("--option", option))
            if value is not None
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)}: filters of instance prices; --kind api takes --model and "
                "--provider"
            )
        _list_api(ctx, model, provider, as_json)
        return
    if model is not None:
        raise UsageError("--model: a filter of per-token prices; add --kind api")
    with sessions_from(ctx) as sessions:
        query = PriceQuery(provider, region, gpu, option)
        entries = prices_in_force(query, sessions, loaded=_loaded)
    if as_json:
        if not entries:
            _nothing_matches("prices")
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        stdout.print("no prices match these filters (see `planner prices list` without filters)")
        return
    points = [e.point for e in entries]
    print_table(
        [
            Column("provider", [p.provider.value for p in points]),
            Column("region", [printable(p.region) for p in points]),
            Column("instance", [printable(p.instance_type) for p in points]),
            Column("GPUs", [f"{p.gpu_count} x {printable(p.gpu_model)}" for p in points]),
            Column("option", [option_label(p) for p in points]),
            Column("$/hour", [_money(p.usd_per_hour) for p in points], justify="right"),
            Column("$/GPU-hour", [_money(p.usd_per_gpu_hour) for p in points], 1, justify="right"),
            Column(
                "upfront $",
                [f"{p.upfront_usd:,.0f}" if p.upfront_usd else "-" for p in points],
                3,
                justify="right",
            ),
            Column("date", [p.effective_date for p in points], 2),
            Column("from", [_from(e) for e in entries], 4),
        ]
    )
    stdout.print(f"{len(entries)} prices; sources: `planner prices list --json`")


@app.command("compare")
@user_errors
def compare_command(
    ctx: typer.Context,
    gpu: str = typer.Option(
        ..., "--gpu", help="GPU: catalog name, alias or family (H100 = H100-SXM and H100-PCIe)."
    ),
    option: str = typer.Option("all", "--option", help=OPTION_HELP),
    provider: str | None = typer.Option(None, "--provider", help="Only this provider."),
    region: str | None = typer.Option(None, "--region", help="Only this region."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Compare $/hour and $/GPU-hour of one GPU across clouds and purchase options, cheapest
    GPU-hour first. Filter values as for `planner prices list`."""
    from planner.usecases.prices import PriceQuery, compare_prices
    from pricing.tables import option_label

    with sessions_from(ctx) as sessions:
        query = PriceQuery(provider, region, gpu, option)
        comparison = compare_prices(query, sessions, loaded=_loaded)
    entries, rows = comparison.entries, comparison.rows
    if as_json:
        if not entries:
            _nothing_matches("prices")
        print_json(rows)
        return
    if not entries:
        stdout.print(
            "no prices match these filters (see `planner prices list` for the GPUs and options "
            "with prices)"
        )
        return
    points = [e.point for e in entries]
    print_table(
        [
            Column("#", [str(i) for i in range(1, len(entries) + 1)], 5),
            Column("provider", [p.provider.value for p in points]),
            Column("region", [printable(p.region) for p in points]),
            Column("instance", [printable(p.instance_type) for p in points]),
            Column("GPUs", [f"{p.gpu_count} x {printable(p.gpu_model)}" for p in points]),
            Column(
                "option",
                [
                    option_label(e.point) + (" (yours)" if e.source_kind == "user" else "")
                    for e in entries
                ],
            ),
            Column("$/hour", [_money(p.usd_per_hour) for p in points], justify="right"),
            Column("$/GPU-hour", [_money(p.usd_per_gpu_hour) for p in points], 1, justify="right"),
            Column(
                "vs cheapest OD",
                [
                    "-"
                    if r["vs_cheapest_on_demand"] is None
                    else f"{r['vs_cheapest_on_demand']:+.0%}"
                    for r in rows
                ],
                2,
                justify="right",
            ),
            Column(
                "break-even",
                [
                    "-"
                    if r["break_even_utilization"] is None
                    else f"{r['break_even_utilization']:.0%}"
                    for r in rows
                ],
                3,
                justify="right",
            ),
            Column("date", [p.effective_date for p in points], 4),
        ]
    )
    stdout.print(
        "OD: on-demand; break-even: the share of hours a commitment must be used to cost no "
        "more than on-demand of the same instance; effective prices (upfronts amortized); spot "
        "prices move, see each row's date; sources: --json",
        soft_wrap=False,
    )


IMPORT_HELP = (
    "Your price sheet: .csv (separated by commas, semicolons or tabs; UTF-8) or the first "
    "worksheet of an .xlsx (see docs/pricing.md). Numbers take a decimal point; a comma only "
    "as an unambiguous thousands separator (1,234.50), so 1,09 and 1,234 are refused unless "
    "--decimal-comma. At most "
    f"{PRICE_SHEET_MAX_ROWS:,} rows, {PRICE_SHEET_MAX_COLUMNS} columns, "
    f"{PRICE_SHEET_MAX_CELL_CHARS:,} characters a cell; an "
    f".xlsx part may unpack to {PRICE_SHEET_MAX_XLSX_PART_BYTES // 2**20} MiB."
)


@app.command("import")
@user_errors
def import_command(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help=IMPORT_HELP),
    label: str | None = typer.Option(None, "--label", help="Name of this version (default: file)."),
    decimal_comma: bool = typer.Option(
        False,
        "--decimal-comma",
        help="The sheet's text numbers use a decimal comma and point-grouped thousands "
        "(1,09 = 1.09; 1.234,50 = 1234.5). Numbers an .xlsx stores as numbers are unaffected.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help=f"Import prices that look implausible: more than {PRICE_MAX_RATIO:g}x (or under "
        f"1/{PRICE_MAX_RATIO:g} of) the price in force for the same instance, region and "
        f"option, below {PRICE_MIN_USD_PER_HOUR} $/h, or dated before 2000 or over 10 years ahead.",
    ),
    kind: str = typer.Option(
        "instance",
        "--kind",
        help="instance: GPU instance prices (the columns of docs/pricing.md); api: per-token "
        "prices (provider, offer, input_usd_per_mtok, output_usd_per_mtok, ...; see "
        "docs/pricing.md, Per-token API prices).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Import your own prices (negotiated discounts, private offers) as a new version; they
    override list prices of the same instance, region and option (--kind api: of the same
    provider and offer). Importing the same content again while its prices are in force does
    nothing (and says so)."""
    from planner.usecases.prices import PriceImportRequest, import_prices, price_kind

    request = PriceImportRequest(path, label, decimal_comma, force)
    if price_kind(kind) == "api":
        _import_api(ctx, path, request, as_json)
        return
    with sessions_from(ctx) as sessions:
        imported = import_prices(request, sessions, loaded=_loaded)
    result, entries = imported.result, imported.overrides
    version = result.version
    if as_json:
        print_json(
            {
                **version.to_dict(),
                "imported": result.imported,
                "overrides": [e.to_dict() for e in entries],
            }
        )
        return
    if not result.imported:
        stdout.print(
            f"{escape(printable(str(path)))}: the same prices are already imported as "
            f"{escape(printable(version.describe()))} and in force; nothing to do"
        )
        return
    stdout.print(
        f"imported {version.row_count} prices from {escape(printable(str(path)))} as version "
        f"{version.id} ({escape(printable(version.label))}); {len(entries)} override list prices"
    )
    for e in entries:
        assert e.overrides is not None
        change = e.point.usd_per_hour / e.overrides.usd_per_hour - 1.0
        stdout.print(
            f"  {escape(printable('/'.join(x for x in e.point.key() if x)))}: "
            f"{_money(e.overrides.usd_per_hour)} -> {_money(e.point.usd_per_hour)} ({change:+.1%})"
        )


def _import_api(ctx: typer.Context, path: Path, request: PriceImportRequest, as_json: bool) -> None:
    from planner.usecases.prices import import_api_prices

    with sessions_from(ctx) as sessions:
        imported = import_api_prices(request, sessions, loaded=_api_loaded)
    result, entries = imported.result, imported.overrides
    version = result.version
    if as_json:
        print_json(
            {
                **version.to_dict(),
                "kind": "api",
                "imported": result.imported,
                "overrides": [e.to_dict() for e in entries],
            }
        )
        return
    if not result.imported:
        stdout.print(
            f"{escape(printable(str(path)))}: the same per-token prices are already imported as "
            f"API {escape(printable(version.describe()))} and in force; nothing to do"
        )
        return
    stdout.print(
        f"imported {version.row_count} per-token prices from {escape(printable(str(path)))} as "
        f"API version {version.id} ({escape(printable(version.label))}); {len(entries)} "
        "override list prices"
    )
    for e in entries:
        assert e.overrides is not None
        stdout.print(
            f"  {escape(printable(e.price.provider))} {escape(printable(e.price.offer))}: input "
            f"{_usd_per_mtok(e.overrides.input_usd_per_mtok)} -> "
            f"{_usd_per_mtok(e.price.input_usd_per_mtok)}, output "
            f"{_usd_per_mtok(e.overrides.output_usd_per_mtok)} -> "
            f"{_usd_per_mtok(e.price.output_usd_per_mtok)} per million tokens"
        )


def _diff_table(title: str, points: list[PricePoint]) -> None:
    from pricing.tables import option_label

    print_table(
        [
            Column("provider", [p.provider.value for p in points]),
            Column("region", [printable(p.region) for p in points]),
            Column("instance", [printable(p.instance_type) for p in points]),
            Column("GPUs", [f"{p.gpu_count} x {printable(p.gpu_model)}" for p in points], 1),
            Column("option", [option_label(p) for p in points]),
            Column("$/hour", [_money(p.usd_per_hour) for p in points], justify="right"),
        ],
        title=title,
    )


def _print_diff(result: SheetDiff) -> None:
    from pricing.tables import option_label

    stdout.print(
        f"{escape(printable(result.old.describe()))} -> {escape(printable(result.new.describe()))}"
    )
    if result.scope == "covered":
        stdout.print("compared over the providers and regions the newer version covers")
    elif result.scope == "keys":
        stdout.print("compared over the prices the newer version has")
    stdout.print(
        f"{len(result.changed)} changed, {len(result.added)} added, {len(result.removed)} "
        f"removed, {result.unchanged} unchanged"
    )
    if result.changed:
        changes = result.changed
        print_table(
            [
                Column("provider", [c.new.provider.value for c in changes]),
                Column("region", [printable(c.new.region) for c in changes]),
                Column("instance", [printable(c.new.instance_type) for c in changes]),
                Column("option", [option_label(c.new) for c in changes]),
                Column("old $/hour", [_money(c.old.usd_per_hour) for c in changes], 1, "right"),
                Column("new $/hour", [_money(c.new.usd_per_hour) for c in changes], 0, "right"),
                Column(
                    "change",
                    [
                        f"{c.pct_change:+.1f}%"
                        + (
                            f" (upfront {c.old.upfront_usd:,.0f} -> {c.new.upfront_usd:,.0f})"
                            if c.old.upfront_usd != c.new.upfront_usd
                            else ""
                        )
                        for c in changes
                    ],
                    0,
                    "right",
                ),
            ],
            title="changed",
        )
    if result.added:
        _diff_table("added", result.added)
    if result.removed:
        _diff_table("removed", result.removed)


@app.command("diff")
@user_errors
def diff_command(
    ctx: typer.Context,
    old: int | None = typer.Argument(
        None, help="Older version id (see `planner prices versions`)."
    ),
    new: int | None = typer.Argument(None, help="Newer version id."),
    scope: str | None = typer.Option(
        None,
        "--scope",
        help="all: every price of both; covered: only the providers and regions the newer "
        "version has; keys: only the prices the newer version has (default: all for two "
        "versions of the same kind, else keys after a user sheet and covered after a refresh).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """What changed between two price-sheet versions (default: the newest and the one before
    it of the same kind): added, removed and changed prices with the % change."""
    from planner.usecases.prices import PriceDiffRequest, diff_prices

    with sessions_from(ctx) as sessions:
        result = diff_prices(PriceDiffRequest(old, new, scope), sessions, loaded=_loaded)
    if as_json:
        print_json(result.to_dict())
        return
    _print_diff(result)


@app.command("versions")
@user_errors
def versions_command(
    ctx: typer.Context,
    kind: str = typer.Option("instance", "--kind", help=KIND_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """The history of price sheets: every snapshot load, refresh (failed ones too) and import
    (--kind api: of the per-token API price sheets)."""
    from planner.usecases.prices import api_price_versions, price_kind, price_versions

    with sessions_from(ctx) as sessions:
        if price_kind(kind) == "api":
            versions = api_price_versions(sessions, loaded=_api_loaded)
        else:
            versions = price_versions(sessions, loaded=_loaded)
    if as_json:
        print_json([v.to_dict() for v in versions])
        return
    table = Table("id", "kind", "label", "fetched (UTC)", "prices", "status")
    for v in versions:
        status = v.status if v.error is None else f"{v.status}: {v.error}"
        table.add_row(
            str(v.id),
            v.source_kind,
            escape(printable(v.label)),
            f"{v.fetched_at:%Y-%m-%d %H:%M}",
            f"{v.row_count:,}",
            escape(printable(status, 200)),
        )
    print_whole(table)


@app.command("load-snapshot")
@user_errors
def load_snapshot_command(
    ctx: typer.Context,
    force: bool = typer.Option(
        False, "--force", help="Load it again even if this snapshot is already a version."
    ),
    kind: str = typer.Option(
        "instance",
        "--kind",
        help="instance: the GPU instance snapshot (gpu_prices_snapshot.csv); api: the per-token "
        "API snapshot (api_prices_snapshot.csv).",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Load a bundled price snapshot (data/prices/) as a new version."""
    from planner.usecases.prices import load_api_snapshot, load_snapshot, price_kind

    api = price_kind(kind) == "api"
    with sessions_from(ctx) as sessions:
        if api:
            version, loaded = load_api_snapshot(sessions, force=force)
        else:
            version, loaded = load_snapshot(sessions, force=force)
    if as_json:
        print_json({**version.to_dict(), "loaded": loaded, **({"kind": "api"} if api else {})})
        return
    what = "per-token API prices as API " if api else "prices as "
    if loaded:
        stdout.print(f"loaded {version.row_count} {what}{escape(version.describe())}")
    else:
        stdout.print(
            f"this snapshot is already {escape(version.describe())}; --force loads it again"
        )


@app.command("refresh")
@user_errors
def refresh_command(
    ctx: typer.Context,
    provider: str = typer.Option(..., "--provider", help="aws, gcp or azure."),
    region: str | None = typer.Option(
        None, "--region", help="Only this region (default: the loader's regions)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Fetch a provider's current prices from its API as a new version. On failure the last
    good prices stay, the failure is recorded, and the command exits non-zero."""
    from planner.usecases.prices import PriceRefreshRequest, refresh_prices

    with sessions_from(ctx) as sessions:
        refreshed = refresh_prices(PriceRefreshRequest(provider, region), sessions)
    version, changes = refreshed.version, refreshed.changes
    if as_json:
        print_json({**version.to_dict(), "diff": changes.to_dict() if changes else None})
        return
    stdout.print(f"fetched {version.row_count} prices as {escape(version.describe())}")
    if changes is not None:
        stdout.print(
            f"since version {changes.old.id}: {len(changes.changed)} changed, "
            f"{len(changes.added)} added, {len(changes.removed)} removed "
            f"(`planner prices diff {changes.old.id} {version.id}`)"
        )


@app.command("bill")
@user_errors
def bill_command(
    ctx: typer.Context,
    dataset: str = typer.Option(..., "--dataset", help="The ingested request log to bill."),
    provider: str | None = typer.Option(
        None, "--provider", help="Only this provider's offers (openai, together, bedrock, ...)."
    ),
    batch: bool = typer.Option(
        False, "--batch", help="Through the batch API (offers without a batch price left out)."
    ),
    forecast: int | None = typer.Option(
        None, "--forecast", min=1, help="Also bill the month a stored forecast expects."
    ),
    model: str | None = typer.Option(
        None, "--model", help="The model of the log's requests that name none."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """A request log as a per-token API would bill it: per month and logged model, its tokens
    and the cheapest offer serving it (--json: every offer)."""
    from planner.usecases.api_bill import BillRequest, bill_log

    with sessions_from(ctx) as sessions:
        bill = bill_log(BillRequest(dataset, provider, model, batch, forecast), sessions)
    if as_json:
        print_json(bill.to_dict())
        return
    lines = bill.lines
    print_table(
        [
            Column("period", [line.period for line in lines]),
            Column(
                "model (as logged)", [printable(str(line.log_model)) for line in lines], wrap=True
            ),
            Column("requests", [f"{line.requests:,.0f}" for line in lines], justify="right"),
            Column(
                "tokens in / cached / out",
                [
                    f"{line.input_tokens:,.0f} / {line.cached_tokens:,.0f} / "
                    f"{line.output_tokens:,.0f}"
                    for line in lines
                ],
                justify="right",
            ),
            Column(
                "cheapest offer",
                [f"{c.provider} {c.offer}" if (c := line.cheapest) else "none" for line in lines],
            ),
            Column(
                "$",
                [f"${c.usd:,.2f}" if (c := line.cheapest) else "-" for line in lines],
                justify="right",
            ),
            Column("offers", [f"{len(line.offers)}" for line in lines], justify="right"),
        ]
    )
    for period, usd in bill.totals().items():
        stdout.print(
            f"{period}: ${usd:,.2f} at the cheapest offers" + (" (batch)" if batch else "")
        )
    for note in bill.notes:
        stderr.print(f"note: {note}", markup=False)
