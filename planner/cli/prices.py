"""``planner prices list|compare|import|diff|versions|load-snapshot|refresh``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, stderr, stdout, store_from, user_errors
from planner.errors import NotFoundError, UsageError
from planner.store import Store
from pricing.costs import commitment_break_evens
from pricing.model import PricePoint
from pricing.sheets import (
    REFRESH_PROVIDERS,
    PriceEntry,
    SheetDiff,
    default_diff_pair,
    diff,
    ensure_list_prices,
    import_user_sheet,
    latest_entries,
    list_versions,
    load_snapshot_version,
    option_filter,
    refresh,
)

app = typer.Typer(
    help="Cloud GPU prices: the bundled snapshot, live refreshes, your own sheets, history.",
    no_args_is_help=True,
)

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON.")
OPTION_HELP = (
    "Purchase option: on-demand, spot, reserved-1y, reserved-3y, savings-plan-1y, "
    "savings-plan-3y, committed-1y, committed-3y, or a group: reserved, savings-plan, "
    "committed, commitments, all."
)


def _ensure(store: Store) -> None:
    """Load the bundled snapshot, in its own transaction, if the store has no list prices."""
    with store.session() as session:
        loaded = ensure_list_prices(session)
    if loaded is not None:
        stderr.print(
            f"the store had no prices: loaded the bundled snapshot as version {loaded.id} "
            f"({loaded.row_count} prices)",
            markup=False,
        )


def _option_label(point: PricePoint) -> str:
    extra = " ".join(x for x in (point.plan_kind, point.payment) if x)
    return point.purchase_option.value + (f" ({extra})" if extra else "")


def _money(value: float) -> str:
    return f"{value:,.4f}"


def _from(entry: PriceEntry) -> str:
    text = f"v{entry.version_id} {entry.source_kind}"
    if entry.overrides is not None:
        text += f" (list {_money(entry.overrides.usd_per_hour)})"
    return text


@app.command("list")
@user_errors
def list_command(
    ctx: typer.Context,
    provider: str | None = typer.Option(None, "--provider", help="aws, gcp, azure or other."),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU: catalog name, alias or family (H100 = H100-SXM and H100-PCIe)."
    ),
    region: str | None = typer.Option(None, "--region", help="Region, e.g. us-east-1."),
    option: str | None = typer.Option(None, "--option", help=OPTION_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    """List the prices in force: the newest version's price of each instance and option, your
    own sheet's price where you imported one."""
    option_filter(option)
    with store_from(ctx) as store:
        _ensure(store)
        with store.session() as session:
            entries = latest_entries(session, provider, region=region, gpu=gpu, option=option)
    if as_json:
        print_json([e.to_dict() for e in entries])
        return
    if not entries:
        stdout.print("no prices match (see `planner prices list` without filters)")
        return
    table = Table(
        "provider",
        "region",
        "instance",
        "GPUs",
        "option",
        "$/hour",
        "$/GPU-hour",
        "upfront $",
        "date",
        "from",
    )
    for e in entries:
        p = e.point
        table.add_row(
            p.provider.value,
            escape(p.region),
            escape(p.instance_type),
            f"{p.gpu_count} x {escape(p.gpu_model)}",
            _option_label(p),
            _money(p.usd_per_hour),
            _money(p.usd_per_gpu_hour),
            f"{p.upfront_usd:,.0f}" if p.upfront_usd else "-",
            p.effective_date,
            _from(e),
        )
    stdout.print(table)
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
    GPU-hour first."""
    option_filter(option)
    with store_from(ctx) as store:
        _ensure(store)
        with store.session() as session:
            entries = latest_entries(session, provider, region=region, gpu=gpu, option=option)
            # the on-demand prices beside each commitment, whatever --option selects
            beside = latest_entries(session, provider, region=region, gpu=gpu, option="on-demand")
            if not entries:
                known = sorted({e.point.gpu_model for e in latest_entries(session)})
                raise NotFoundError(
                    f"no {option} prices for GPU {gpu!r}"
                    + (f" in {provider}" if provider else "")
                    + (f" {region}" if region else "")
                    + f"; GPUs with prices: {', '.join(known)}"
                )
    entries.sort(key=lambda e: (e.point.usd_per_gpu_hour, e.point.usd_per_hour))
    on_demand = [
        e.point.usd_per_gpu_hour for e in entries if e.point.purchase_option.value == "on-demand"
    ]
    baseline = min(on_demand) if on_demand else None
    break_evens = commitment_break_evens([e.point for e in entries + beside])
    rows: list[dict[str, Any]] = []
    for e in entries:
        data = e.to_dict()
        data["vs_cheapest_on_demand"] = (
            e.point.usd_per_gpu_hour / baseline - 1.0 if baseline else None
        )
        data["break_even_utilization"] = break_evens.get(e.point.key())
        rows.append(data)
    if as_json:
        print_json(rows)
        return
    table = Table(
        "#",
        "provider",
        "region",
        "instance",
        "GPUs",
        "option",
        "$/hour",
        "$/GPU-hour",
        "vs cheapest OD",
        "break-even",
        "date",
    )
    for rank, (e, row) in enumerate(zip(entries, rows, strict=True), start=1):
        p = e.point
        vs = row["vs_cheapest_on_demand"]
        table.add_row(
            str(rank),
            p.provider.value,
            escape(p.region),
            escape(p.instance_type),
            f"{p.gpu_count} x {escape(p.gpu_model)}",
            _option_label(p) + (" (yours)" if e.source_kind == "user" else ""),
            _money(p.usd_per_hour),
            _money(p.usd_per_gpu_hour),
            "-" if vs is None else f"{vs:+.0%}",
            "-"
            if row["break_even_utilization"] is None
            else f"{row['break_even_utilization']:.0%}",
            p.effective_date,
        )
    stdout.print(table)
    stdout.print(
        "OD: on-demand; break-even: the share of hours a commitment must be used to cost no "
        "more than on-demand of the same instance; effective prices (upfronts amortized); spot "
        "prices move, see each row's date; sources: --json"
    )


@app.command("import")
@user_errors
def import_command(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="Your price sheet: .csv or .xlsx (see docs/pricing.md)."),
    label: str | None = typer.Option(None, "--label", help="Name of this version (default: file)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Import your own prices (negotiated discounts, private offers) as a new version; they
    override list prices of the same instance, region and option."""
    with store_from(ctx) as store:
        _ensure(store)
        with store.session() as session:
            version = import_user_sheet(session, path, label=label)
        with store.session() as session:
            entries = [
                e for e in latest_entries(session) if e.version_id == version.id and e.overrides
            ]
    if as_json:
        print_json({**version.to_dict(), "overrides": [e.to_dict() for e in entries]})
        return
    stdout.print(
        f"imported {version.row_count} prices from {escape(str(path))} as version {version.id} "
        f"({escape(version.label)}); {len(entries)} override list prices"
    )
    for e in entries:
        assert e.overrides is not None
        change = e.point.usd_per_hour / e.overrides.usd_per_hour - 1.0
        stdout.print(
            f"  {escape('/'.join(x for x in e.point.key() if x))}: "
            f"{_money(e.overrides.usd_per_hour)} -> {_money(e.point.usd_per_hour)} ({change:+.1%})"
        )


def _diff_table(title: str, points: list[PricePoint]) -> Table:
    table = Table("provider", "region", "instance", "GPUs", "option", "$/hour", title=title)
    for p in points:
        table.add_row(
            p.provider.value,
            escape(p.region),
            escape(p.instance_type),
            f"{p.gpu_count} x {escape(p.gpu_model)}",
            _option_label(p),
            _money(p.usd_per_hour),
        )
    return table


def _print_diff(result: SheetDiff) -> None:
    stdout.print(f"{escape(result.old.describe())} -> {escape(result.new.describe())}")
    if result.scope == "covered":
        stdout.print("compared over the providers and regions the newer version covers")
    elif result.scope == "keys":
        stdout.print("compared over the prices the newer version has")
    stdout.print(
        f"{len(result.changed)} changed, {len(result.added)} added, {len(result.removed)} "
        f"removed, {result.unchanged} unchanged"
    )
    if result.changed:
        table = Table(
            "provider",
            "region",
            "instance",
            "option",
            "old $/hour",
            "new $/hour",
            "change",
            title="changed",
        )
        for c in result.changed:
            p = c.new
            upfront = (
                f" (upfront {c.old.upfront_usd:,.0f} -> {c.new.upfront_usd:,.0f})"
                if c.old.upfront_usd != c.new.upfront_usd
                else ""
            )
            table.add_row(
                p.provider.value,
                escape(p.region),
                escape(p.instance_type),
                _option_label(p),
                _money(c.old.usd_per_hour),
                _money(c.new.usd_per_hour),
                f"{c.pct_change:+.1f}%{upfront}",
            )
        stdout.print(table)
    if result.added:
        stdout.print(_diff_table("added", result.added))
    if result.removed:
        stdout.print(_diff_table("removed", result.removed))


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
    if (old is None) != (new is None):
        raise UsageError("give two versions (OLD NEW), or none for the latest two")
    if scope not in (None, "all", "covered", "keys"):
        raise UsageError(f"--scope {scope!r}: expected all, covered or keys")
    with store_from(ctx) as store:
        _ensure(store)
        with store.session() as session:
            if old is None or new is None:
                old, new, chosen = default_diff_pair(session)
            else:
                chosen = "all"
            if scope == "all":
                chosen = "all"
            elif scope == "covered":
                chosen = "covered"
            elif scope == "keys":
                chosen = "keys"
            result = diff(session, old, new, scope=chosen)
    if as_json:
        print_json(result.to_dict())
        return
    _print_diff(result)


@app.command("versions")
@user_errors
def versions_command(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """The history of price sheets: every snapshot load, refresh (failed ones too) and import."""
    with store_from(ctx) as store:
        _ensure(store)
        with store.session() as session:
            versions = list_versions(session)
    if as_json:
        print_json([v.to_dict() for v in versions])
        return
    table = Table("id", "kind", "label", "fetched (UTC)", "prices", "status")
    for v in versions:
        status = v.status if v.error is None else f"{v.status}: {v.error}"
        table.add_row(
            str(v.id),
            v.source_kind,
            escape(v.label),
            f"{v.fetched_at:%Y-%m-%d %H:%M}",
            f"{v.row_count:,}",
            escape(status),
        )
    stdout.print(table)


@app.command("load-snapshot")
@user_errors
def load_snapshot_command(
    ctx: typer.Context,
    force: bool = typer.Option(
        False, "--force", help="Load it again even if this snapshot is already a version."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Load the bundled price snapshot (data/prices/) as a new version."""
    with store_from(ctx) as store, store.session() as session:
        version, loaded = load_snapshot_version(session, force=force)
    if as_json:
        print_json({**version.to_dict(), "loaded": loaded})
        return
    if loaded:
        stdout.print(f"loaded {version.row_count} prices as {escape(version.describe())}")
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
    name = provider.strip().lower()
    if name not in REFRESH_PROVIDERS:
        raise UsageError(f"--provider {provider!r}: expected one of {', '.join(REFRESH_PROVIDERS)}")
    with store_from(ctx) as store:
        version = refresh(store, name, region)
        with store.session() as session:
            previous = [
                v
                for v in list_versions(session)
                if v.source_kind == name and v.status == "ok" and v.id != version.id
            ]
            changes = (
                diff(session, previous[-1].id, version.id, scope="covered") if previous else None
            )
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
