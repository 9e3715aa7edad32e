"""Prices: the cloud GPU prices in force (AWS, GCP, Azure and your own sheets) by purchase
option, in $/hour and $/GPU-hour; the price-sheet versions and what changed between two; your
own override sheet, imported as ``planner prices import`` imports it; and the per-token prices
of hosted model APIs (``planner prices list --kind api``), with their own override sheet."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pandas as pd
import plotly.express as px
import streamlit as st

from app import common
from planner.usecases.prices import (
    ApiPriceQuery,
    PriceDiffRequest,
    PriceImportRequest,
    PriceQuery,
    SheetUpload,
    api_prices_in_force,
    default_price_diff,
    diff_prices,
    ensure_api_prices_loaded,
    ensure_prices,
    import_api_prices,
    import_prices,
    price_versions,
    prices_in_force,
)
from pricing.api import TokenPrice, cost_usd
from pricing.entries import STATUS_OK
from pricing.tables import diff_rows, price_rows, version_rows

IMPORTED = "prices-imported"  # the last import's message, shown once after the rerun
API_IMPORTED = "prices-api-imported"
API_COLUMNS = {
    "input_usd_per_mtok": common.price_column("input $/M tok"),
    "cached_input_usd_per_mtok": common.price_column("cached input $/M tok"),
    "output_usd_per_mtok": common.price_column("output $/M tok"),
    "batch_discount": st.column_config.NumberColumn(
        "batch off", format="percent", help="The share the provider's batch API takes off."
    ),
    "monthly_usd": common.money_column("$ / month", help="The tokens above, billed at this price."),
    "list_input_usd_per_mtok": common.price_column("list input $/M tok"),
    "source_url": st.column_config.LinkColumn("source"),
}
PRICE_COLUMNS = {
    "usd_per_hour": common.price_column("$/hour"),
    "usd_per_gpu_hour": common.price_column("$/GPU-hour"),
    "upfront_usd": common.money_column("upfront $"),
    "list_usd_per_hour": common.price_column("list $/hour"),
    "break_even_utilization": st.column_config.NumberColumn(
        "break-even use",
        format="percent",
        help="Share of hours a commitment must be used to "
        "cost no more than on-demand of the same instance.",
    ),
    "gpu_memory_gb": st.column_config.NumberColumn("GiB / GPU"),
}


@st.cache_data(show_spinner=False)
def _prices(url: str, version: str) -> pd.DataFrame:
    return pd.DataFrame(price_rows(prices_in_force(PriceQuery(), common.session)))


@st.cache_data(show_spinner=False)
def _versions(url: str, version: str) -> pd.DataFrame:
    return pd.DataFrame(version_rows(price_versions(common.session)))


@st.cache_data(show_spinner=False)
def _default_pair(url: str, version: str) -> tuple[int, int, str] | None:
    return default_price_diff(common.session)


@st.cache_data(show_spinner=False)
def _diff(
    url: str, version: str, old: int, new: int, scope: str
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    result = diff_prices(PriceDiffRequest(old, new, scope), common.session)
    summary = {
        "old": result.old.describe(),
        "new": result.new.describe(),
        "scope": result.scope,
        "changed": len(result.changed),
        "added": len(result.added),
        "removed": len(result.removed),
        "unchanged": result.unchanged,
    }
    return summary, diff_rows(result)


def _ensure_prices() -> None:
    """As every ``planner prices`` command does: a store with no list prices gets the bundled
    snapshot (once; a cheap query when prices are there)."""
    with common.shown_errors():
        loaded = ensure_prices(common.session)
        if loaded is not None:
            st.info(
                f"The store had no prices: loaded the bundled snapshot as version {loaded.id} "
                f"({loaded.row_count} prices).",
                icon=":material/info:",
            )


def _filtered(frame: pd.DataFrame) -> pd.DataFrame:
    """The filters: each empty multiselect keeps everything."""
    columns = st.columns(4)
    choices = {
        "gpu": ("GPU", "prices-gpu"),
        "provider": ("Provider", "prices-provider"),
        "region": ("Region", "prices-region"),
        "purchase_option": ("Purchase option", "prices-option"),
    }
    keep = pd.Series(True, index=frame.index)
    for column, (where, (label, key)) in zip(columns, choices.items(), strict=True):
        options = sorted(frame[where].unique()) if where != "purchase_option" else _options(frame)
        chosen = column.multiselect(label, options, key=key, placeholder="all")
        if chosen:
            keep &= frame[where].isin(chosen)
    return frame[keep]


def _options(frame: pd.DataFrame) -> list[str]:
    order = list(common.PURCHASE_COLOURS)
    present = set(frame["purchase_option"])
    return [o for o in order if o in present] + sorted(present - set(order))


def _price_chart(frame: pd.DataFrame) -> None:
    by = st.radio(
        "Colour by",
        ["provider", "purchase option"],
        horizontal=True,
        key="prices-colour",
    )
    colour = "provider" if by == "provider" else "purchase_option"
    colours = common.PROVIDER_COLOURS if by == "provider" else common.PURCHASE_COLOURS
    # GPUs from the cheapest GPU-hour up, so the axis reads as a price ladder.
    order = frame.groupby("gpu")["usd_per_gpu_hour"].min().sort_values().index.tolist()
    fig = px.strip(
        frame,
        x="gpu",
        y="usd_per_gpu_hour",
        color=colour,
        color_discrete_map=colours,
        category_orders={"gpu": order},
        hover_data={"instance": True, "region": True, "option": True, "usd_per_hour": ":.4f"},
        labels={
            "gpu": "GPU",
            "usd_per_gpu_hour": "$ per GPU-hour",
            "purchase_option": "purchase option",
            "usd_per_hour": "$/hour",
        },
    )
    fig.update_yaxes(title="$ per GPU-hour", rangemode="tozero")
    fig.update_xaxes(title="GPU")
    fig.update_layout(legend_title_text="")
    st.markdown(
        "**$ per GPU-hour by GPU**: one dot a price (effective: upfronts spread over the "
        "term), GPUs from the cheapest GPU-hour up"
    )
    common.chart(fig, key="prices-chart")


def _prices_tab(frame: pd.DataFrame) -> None:
    shown = _filtered(frame)
    if shown.empty:
        st.info("No prices match these filters.", icon=":material/filter_alt_off:")
        return
    cheapest = shown.sort_values("usd_per_gpu_hour").iloc[0]
    left, middle, right = st.columns(3)
    left.metric("Prices", f"{len(shown):,}")
    middle.metric("Instance types", f"{shown['instance'].nunique():,}")
    right.metric(
        "Cheapest GPU-hour",
        f"${cheapest['usd_per_gpu_hour']:,.4f}",
        help=f"{cheapest['provider']} {cheapest['instance']} ({cheapest['gpu']}), "
        f"{cheapest['region']}, {cheapest['option']}",
    )
    _price_chart(shown)
    common.table(
        shown,
        width="stretch",
        column_config=PRICE_COLUMNS,
        column_order=[c for c in shown.columns if c != "purchase_option"],  # "option" says it
        key="prices-table",
    )
    common.download_table(shown, "prices", key="prices-download")
    st.caption(
        "Effective prices: an upfront payment is spread over the term. A row from your own "
        "sheet (source kind `user`) shows the list price it overrides. Spot prices move; see "
        "each row's date."
    )


def _versions_tab(url: str, version: str) -> None:
    versions = _versions(url, version)
    st.subheader("Price-sheet versions")
    common.table(versions, width="stretch", key="prices-versions")
    common.download_table(versions, "price-versions", key="prices-versions-download")
    st.subheader("What changed between two versions")
    pair = _default_pair(url, version)
    good = versions[versions["status"] == STATUS_OK]["id"].tolist() if not versions.empty else []
    if pair is None or len(good) < 2:
        st.info(
            "A diff needs two price-sheet versions: import your sheet (tab Your price sheet) "
            "or refresh a provider with `planner prices refresh`.",
            icon=":material/info:",
        )
        return
    labels = {
        int(r["id"]): f"{r['id']}: {r['kind']}, {r['label']} ({r['fetched_utc']})"
        for r in versions.to_dict("records")
    }
    old_default, new_default, scope_default = pair
    left, middle, right = st.columns([2, 2, 1])
    old = left.selectbox(
        "Older version",
        good,
        index=good.index(old_default),
        format_func=labels.__getitem__,
        key="prices-diff-old",
    )
    new = middle.selectbox(
        "Newer version",
        good,
        index=good.index(new_default),
        format_func=labels.__getitem__,
        key="prices-diff-new",
    )
    scopes = ["all", "covered", "keys"]
    scope = right.selectbox(
        "Compare over",
        scopes,
        index=scopes.index(scope_default),
        key="prices-diff-scope",
        help="all: every price of both; covered: the providers and regions the newer version "
        "has; keys: only the prices the newer version has (a user sheet's).",
    )
    with common.shown_errors():
        summary, rows = _diff(url, version, int(old), int(new), scope)
        st.markdown(
            f"**{summary['old']} → {summary['new']}** (over {summary['scope']}): "
            f"{summary['changed']} changed, {summary['added']} added, "
            f"{summary['removed']} removed, {summary['unchanged']} unchanged"
        )
        for part in ("changed", "added", "removed"):
            if rows[part]:
                frame = pd.DataFrame(rows[part])
                st.markdown(f"**{part.capitalize()}**")
                config = {
                    "change_pct": st.column_config.NumberColumn("change", format="%+.1f%%"),
                    "old_usd_per_hour": common.price_column("old $/hour"),
                    "new_usd_per_hour": common.price_column("new $/hour"),
                    **PRICE_COLUMNS,
                }
                common.table(
                    frame,
                    width="stretch",
                    column_config=config,
                    key=f"prices-diff-{part}",
                )
                common.download_table(
                    frame, f"price-diff-{old}-{new}-{part}", key=f"prices-diff-{part}-download"
                )


def import_upload(name: str, data: bytes, *, label: str, decimal_comma: bool, force: bool) -> str:
    """Import an uploaded sheet into the store (nothing stored on an error); what was done."""
    request = PriceImportRequest(
        SheetUpload(name, data),
        label.strip() or None,
        decimal_comma,
        force,
        label_option="label",
    )
    imported = import_prices(request, common.session)
    result, overrides = imported.result, imported.overrides
    version = result.version
    if not result.imported:
        return (
            f"{name}: the same prices are already imported as {version.describe()} and in "
            "force; nothing to do."
        )
    return (
        f"Imported {version.row_count} prices from {name} as version {version.id} "
        f"({version.label}); {len(overrides)} override list prices."
    )


@st.cache_data(show_spinner=False)
def _api_prices(url: str, version: str) -> pd.DataFrame:
    entries = api_prices_in_force(ApiPriceQuery(), common.session)
    return pd.DataFrame(
        [
            {
                "provider": e.price.provider,
                "offer": e.price.offer,
                "model": e.price.model,
                "catalog_model": e.price.catalog_model,
                "input_usd_per_mtok": e.price.input_usd_per_mtok,
                "cached_input_usd_per_mtok": e.price.cached_input_usd_per_mtok,
                "output_usd_per_mtok": e.price.output_usd_per_mtok,
                "batch_discount": e.price.batch_discount,
                "rpm": e.price.rpm,
                "tpm": e.price.tpm,
                "context_tokens": e.price.context_tokens,
                "source_date": e.price.source_date,
                "source_url": e.price.source_url,
                "provenance": e.price.provenance,
                "notes": e.price.notes,
                "source_kind": e.source_kind,
                "version_id": e.version_id,
                "list_input_usd_per_mtok": e.overrides.input_usd_per_mtok if e.overrides else None,
            }
            for e in entries
        ]
    )


def _price(row: Mapping[Hashable, Any]) -> TokenPrice:
    """A table row back as the price it shows (to bill the tokens the page asks about)."""

    def maybe(value: Any) -> Any:
        return None if pd.isna(value) else value

    return TokenPrice(
        provider=row["provider"],
        offer=row["offer"],
        model=row["model"],
        catalog_model=maybe(row["catalog_model"]),
        input_usd_per_mtok=float(row["input_usd_per_mtok"]),
        output_usd_per_mtok=float(row["output_usd_per_mtok"]),
        cached_input_usd_per_mtok=maybe(row["cached_input_usd_per_mtok"]),
        batch_discount=maybe(row["batch_discount"]),
        rpm=None,
        tpm=None,
        context_tokens=None,
        source_url=row["source_url"],
        source_date=row["source_date"],
    )


def _ensure_api_prices() -> None:
    """As ``planner prices list --kind api`` does: a store with no API prices gets the bundled
    API snapshot (once)."""
    with common.shown_errors():
        loaded = ensure_api_prices_loaded(common.session)
        if loaded is not None:
            st.info(
                f"The store had no per-token API prices: loaded the bundled API snapshot as API "
                f"version {loaded.id} ({loaded.row_count} prices).",
                icon=":material/info:",
            )


def import_api_upload(
    name: str, data: bytes, *, label: str, decimal_comma: bool, force: bool
) -> str:
    """Import an uploaded per-token price sheet (nothing stored on an error); what was done."""
    request = PriceImportRequest(
        SheetUpload(name, data), label.strip() or None, decimal_comma, force, "label"
    )
    imported = import_api_prices(request, common.session)
    result, overrides = imported.result, imported.overrides
    version = result.version
    if not result.imported:
        return (
            f"{name}: the same per-token prices are already imported as API "
            f"{version.describe()} and in force; nothing to do."
        )
    return (
        f"Imported {version.row_count} per-token prices from {name} as API version "
        f"{version.id} ({version.label}); {len(overrides)} override list prices."
    )


def _api_tab(frame: pd.DataFrame) -> None:
    st.markdown(
        "What hosted models charge per million tokens: the proprietary models logs name "
        "(OpenAI, Anthropic, Google, Azure OpenAI, Bedrock) and the open-weights hosts "
        "(Together, Fireworks, Groq, DeepInfra, Bedrock) for the catalog's models, as "
        "`planner prices list --kind api` lists them. Every price has its source URL and date."
    )
    left, right = st.columns(2)
    providers = left.multiselect(
        "Provider", sorted(frame["provider"].unique()), key="prices-api-provider", placeholder="all"
    )
    models = right.multiselect(
        "Model", sorted(frame["model"].unique()), key="prices-api-model", placeholder="all"
    )
    shown = frame
    if providers:
        shown = shown[shown["provider"].isin(providers)]
    if models:
        shown = shown[shown["model"].isin(models)]
    if shown.empty:
        st.info("No per-token prices match these filters.", icon=":material/filter_alt_off:")
    else:
        inputs, cached, outputs = st.columns(3)
        input_m = inputs.number_input(
            "Input tokens a month (millions)", min_value=0.0, value=100.0, key="prices-api-in"
        )
        cached_share = cached.number_input(
            "Of which cached (%)",
            min_value=0.0,
            max_value=100.0,
            value=0.0,
            key="prices-api-cached",
        )
        output_m = outputs.number_input(
            "Output tokens a month (millions)", min_value=0.0, value=20.0, key="prices-api-out"
        )
        shown = shown.assign(
            monthly_usd=[
                cost_usd(
                    _price(row), input_m * 1e6, output_m * 1e6, input_m * 1e6 * cached_share / 100
                )
                for row in shown.to_dict("records")
            ]
        )
        common.table(
            shown,
            width="stretch",
            column_config=API_COLUMNS,
            key="prices-api-table",
        )
        common.download_table(shown, "api-prices", key="prices-api-download")
        st.caption(
            "$ / month: the tokens above at each price (cached tokens at the cached-input price "
            "where the offer has one); batch APIs take the share shown off. A row from your own "
            "sheet (source kind `user`) shows the list input price it overrides."
        )
    _api_upload()


def _api_upload() -> None:
    """A user's per-token price sheet, imported as the CLI imports it."""
    st.subheader("Your per-token price sheet")
    st.markdown(
        "Negotiated rates or your own hosts, as `planner prices import FILE --kind api` imports "
        "them. Required columns: `provider`, `offer`, `input_usd_per_mtok`, "
        "`output_usd_per_mtok`; see `docs/pricing.md`, Per-token API prices."
    )
    uploaded = st.file_uploader(
        f"Per-token price sheet (.csv or .xlsx; at most {common.UPLOAD_LIMIT_MB:,} MB)",
        type=["csv", "xlsx", "xlsm"],
        key="prices-api-upload",
    )
    left, middle, right = st.columns([2, 1, 1])
    label = left.text_input(
        "Version name", key="prices-api-upload-label", placeholder="default: the file name"
    )
    decimal_comma = middle.checkbox("Decimal comma", key="prices-api-decimal-comma")
    force = right.checkbox(
        "Import implausible prices",
        key="prices-api-force",
        help="Prices over 10x (or under a tenth of) the price in force for the same offer.",
    )
    if st.button(
        "Import sheet", key="prices-api-import", type="primary", disabled=uploaded is None
    ):
        assert uploaded is not None
        with common.shown_errors():
            st.session_state[API_IMPORTED] = import_api_upload(
                uploaded.name,
                uploaded.getvalue(),
                label=label,
                decimal_comma=decimal_comma,
                force=force,
            )
            st.rerun()
    message = st.session_state.pop(API_IMPORTED, None)
    if message:
        st.success(message, icon=":material/check_circle:")


def _sheet_tab() -> None:
    st.markdown(
        "Your own prices (negotiated discounts, private offers) override list prices of the "
        "same instance, region and option. Columns as in `docs/pricing.md`; required: "
        "`provider`, `region`, `instance_type`, `purchase_option`, `usd_per_hour`. "
        "The sheet is checked exactly as `planner prices import` checks it: a bad row stops "
        "the import with its row and column, and nothing is stored."
    )
    uploaded = st.file_uploader(
        f"Price sheet (.csv or .xlsx; at most {common.UPLOAD_LIMIT_MB:,} MB)",
        type=["csv", "xlsx", "xlsm"],
        key="prices-upload",
    )
    left, middle, right = st.columns([2, 1, 1])
    label = left.text_input(
        "Version name", key="prices-upload-label", placeholder="default: the file name"
    )
    decimal_comma = middle.checkbox(
        "Decimal comma",
        key="prices-decimal-comma",
        help="Text numbers use a decimal comma and point-grouped thousands (1,09 = 1.09).",
    )
    force = right.checkbox(
        "Import implausible prices",
        key="prices-force",
        help="Prices over 10x (or under a tenth of) the price in force, or dated oddly.",
    )
    if st.button("Import sheet", key="prices-import", type="primary", disabled=uploaded is None):
        assert uploaded is not None
        with common.shown_errors():
            st.session_state[IMPORTED] = import_upload(
                uploaded.name,
                uploaded.getvalue(),
                label=label,
                decimal_comma=decimal_comma,
                force=force,
            )
            st.rerun()  # the tables above read the store again
    message = st.session_state.pop(IMPORTED, None)
    if message:
        st.success(message, icon=":material/check_circle:")


st.title("Prices")
st.caption(
    "GPU instance prices in force across AWS, GCP and Azure (and your own sheets), as "
    "`planner prices list` and `compare` show them; the history of price sheets, as "
    "`planner prices versions` and `diff`."
)
_ensure_prices()
url, version = common.store_url(), common.version()
prices_tab, versions_tab, sheet_tab, api_tab = st.tabs(
    ["Prices", "Versions and changes", "Your price sheet", "Per-token APIs"]
)
with prices_tab:
    frame = pd.DataFrame()
    with common.shown_errors():
        frame = _prices(url, version)
    if frame.empty:
        common.empty_store_hint("prices")
    else:
        _prices_tab(frame)
with versions_tab, common.shown_errors():
    _versions_tab(url, version)
with sheet_tab:
    _sheet_tab()
with api_tab:
    _ensure_api_prices()
    api_frame = pd.DataFrame()
    with common.shown_errors():
        api_frame = _api_prices(url, common.version())
    if not api_frame.empty:
        _api_tab(api_frame)
