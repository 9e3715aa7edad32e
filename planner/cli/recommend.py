"""``planner recommend`` and ``planner recommendations list|show``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy.orm import Session

from planner.cli.context import print_json, stderr, stdout, store_from, user_errors
from planner.cli.ingest import parse_start
from planner.cli.simulate import class_slos, parse_duration
from planner.errors import PlannerError, UsageError
from planner.latency.profile import DEFAULT_ENGINE, choose_profile
from planner.latency.registry import all_profiles
from planner.recommend.engine import Recommendation, recommend
from planner.recommend.inputs import (
    DEFAULT_MAX_SEQS,
    DEFAULT_PRECISIONS,
    DEFAULT_PURCHASE,
    DEFAULT_TP,
    Constraints,
    Demand,
    Request,
    SearchOptions,
    Targets,
)
from planner.recommend.store import (
    brief,
    list_recommendations,
    load_recommendation,
    save_recommendation,
)
from planner.simulate.metrics import SLO
from planner.simulate.workload import RateCurve, from_dataset, read_rate_curve, token_pool
from pricing.model import PurchaseOption
from pricing.sheets import ensure_list_prices, latest_prices, option_filter


class NoFleetError(PlannerError):
    """Nothing met the targets: the result is printed, the exit is non-zero."""


def _items(values: list[str]) -> list[str]:
    """Repeatable options that also take comma lists: ``--gpu L4,A10G --gpu H100``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _ints(option: str, values: list[str], default: tuple[int, ...]) -> tuple[int, ...]:
    items = _items(values)
    if not items:
        return default
    try:
        numbers = tuple(int(v) for v in items)
    except ValueError:
        raise UsageError(f"{option}: expected whole numbers such as 1,2,4, got {values}") from None
    if min(numbers) < 1:
        raise UsageError(f"{option}: expected numbers of 1 or more, got {values}")
    return numbers


def _purchase(values: list[str]) -> tuple[PurchaseOption, ...]:
    items = _items(values)
    if not items:
        return DEFAULT_PURCHASE
    chosen: list[PurchaseOption] = []
    for item in items:
        for option in option_filter(item) or ():
            if option not in chosen:
                chosen.append(option)
    if PurchaseOption.ON_DEMAND not in chosen:
        chosen.insert(0, PurchaseOption.ON_DEMAND)
    return tuple(chosen)


def _chunked(value: str) -> tuple[bool, ...]:
    choices = {"both": (True, False), "on": (True,), "off": (False,)}
    if value not in choices:
        raise UsageError(f"--chunked-prefill {value!r}: expected both, on or off")
    return choices[value]


def _forecast_demand(
    session: Session, text: str, tokens_from: str | None, load_scale: float
) -> Demand:
    from planner.forecast.series import _utc
    from planner.forecast.store import load_forecast, points_frame
    from planner.store.models import Dataset

    run = load_forecast(session, int(text.lstrip("#")))
    frame = points_frame(run)
    if frame.empty or frame["demand"].isna().any():
        raise UsageError(f"forecast #{run.id} has no demand curve stored; rerun `planner forecast`")
    curve = RateCurve(_utc(frame["ds"].iloc[0]), frame["demand"].to_numpy(np.float64) * load_scale)
    source = f"forecast #{run.id} at q{run.demand_quantile:g} ({run.source})"
    if tokens_from is None:
        dataset = session.get(Dataset, run.dataset_id) if run.dataset_id is not None else None
        if dataset is None:
            raise UsageError(
                f"forecast #{run.id} was not fitted on a stored dataset: give --tokens-from "
                "DATASET for the request lengths"
            )
        tokens_from = dataset.name
    inputs, outputs = token_pool(session, tokens_from)
    return Demand(curve, inputs, outputs, source)


def _demand(
    session: Session,
    dataset: str | None,
    demand: str | None,
    tokens_from: str | None,
    load_scale: float,
    start: str | None,
    end: str | None,
    seed: int,
) -> Demand:
    if (dataset is None) == (demand is None):
        raise UsageError(
            "give exactly one of --dataset NAME (plan for a logged load) or --demand "
            "FORECAST_ID|CSV (plan for a forecast's demand curve)"
        )
    if not (np.isfinite(load_scale) and load_scale > 0):
        raise UsageError(f"--load-scale must be a positive number, got {load_scale}")
    if dataset is not None:
        workload = from_dataset(
            session,
            dataset,
            load_scale=load_scale,
            start=parse_start(start, "--start"),
            end=parse_start(end, "--end"),
            seed=seed,
        )
        scale = f" x {load_scale:g}" if load_scale != 1 else ""
        return Demand.from_workload(workload, f"dataset {dataset}{scale}")
    assert demand is not None
    if re.fullmatch(r"#?\d+", demand.strip()) and not Path(demand).exists():
        return _forecast_demand(session, demand.strip(), tokens_from, load_scale)
    curve = read_rate_curve(demand)
    if tokens_from is None:
        raise UsageError("--demand CSV needs --tokens-from DATASET for the request lengths")
    inputs, outputs = token_pool(session, tokens_from)
    return Demand(
        RateCurve(curve.start, curve.requests_per_hour * load_scale),
        inputs,
        outputs,
        f"file {demand}" + (f" x {load_scale:g}" if load_scale != 1 else ""),
    )


def recommend_command(
    ctx: typer.Context,
    dataset: str | None = typer.Option(None, "--dataset", help="Plan for an ingested dataset."),
    demand: str | None = typer.Option(
        None, "--demand", help="Or: a stored forecast's id, or a demand curve CSV (ds,y)."
    ),
    tokens_from: str | None = typer.Option(
        None, "--tokens-from", help="Dataset whose request lengths to draw (with --demand)."
    ),
    load_scale: float = typer.Option(1.0, "--load-scale", help="Scale the load (1.5: +50%)."),
    start: str | None = typer.Option(None, "--start", help="With --dataset: from this time."),
    end: str | None = typer.Option(None, "--end", help="With --dataset: until this time."),
    model: str = typer.Option(
        ...,
        "--model",
        help="Model to serve (`planner catalog models`); a comma list allows alternatives "
        "(the first is preferred on a cost tie).",
    ),
    slo_ttft: str | None = typer.Option(
        None, "--slo-ttft-p99", help="P99 time to first token target, e.g. 2s."
    ),
    slo_tpot: str | None = typer.Option(
        None, "--slo-tpot-p99", help="P99 time per output token target, e.g. 200ms."
    ),
    slo_e2e: str | None = typer.Option(
        None, "--slo-e2e-p99", help="P99 end-to-end latency target, e.g. 60s."
    ),
    slo: list[str] = typer.Option([], "--slo", help="Per-class targets: CLASS:ttft=1s,tpot=50ms."),
    min_attainment: float | None = typer.Option(
        None, "--min-attainment", help="Share of requests that must meet every target (0.99)."
    ),
    provider: list[str] = typer.Option([], "--provider", help="Allowed clouds: aws,gcp,azure."),
    region: list[str] = typer.Option([], "--region", help="Allowed regions."),
    gpu: list[str] = typer.Option([], "--gpu", help="Allowed GPU types (e.g. L4,H100)."),
    instance_type: list[str] = typer.Option([], "--instance-type", help="Allowed instances."),
    precision: list[str] = typer.Option(
        [], "--precision", help=f"Allowed precisions (default {','.join(DEFAULT_PRECISIONS)})."
    ),
    max_quality_loss: float | None = typer.Option(
        None,
        "--max-quality-loss",
        help="Most accuracy points a quantized variant may lose (0: full precision only).",
    ),
    tp: list[str] = typer.Option([], "--tp", help="Tensor-parallel degrees to try (1,2,4,8)."),
    max_tp: int = typer.Option(8, "--max-tp", min=1, help="Largest tensor-parallel degree."),
    max_seqs: list[str] = typer.Option(
        [], "--max-seqs", help="Max sequences per replica to try (64,128,256)."
    ),
    chunked_prefill: str = typer.Option(
        "both", "--chunked-prefill", help="Chunked prefill: both, on or off."
    ),
    kv_cache: str = typer.Option("fp16", "--kv-cache", help="KV-cache precision: fp16 or fp8."),
    purchase: list[str] = typer.Option(
        [],
        "--purchase",
        help="Purchase options allowed: on-demand, reserved, savings-plan, committed, "
        "commitments or single options (default: all but spot).",
    ),
    max_spot_share: float = typer.Option(
        0.0, "--max-spot-share", help="Largest share of the load above commitments on spot."
    ),
    spot_class: list[str] = typer.Option(
        [], "--spot-class", help="Request classes that tolerate interruption (default: all)."
    ),
    spot_rate: float = typer.Option(
        0.05, "--spot-interruptions-per-hour", help="Spot interruptions per instance-hour."
    ),
    budget: float | None = typer.Option(None, "--budget", help="Most $ per month."),
    min_replicas: int = typer.Option(1, "--min-replicas", min=0, help="Replicas always up."),
    verify_top: int = typer.Option(20, "--verify-top", min=1, help="Candidates to simulate."),
    verify_hours: int = typer.Option(
        1, "--verify-hours", min=1, help="Consecutive peak hours to simulate."
    ),
    max_attempts: int = typer.Option(
        3, "--max-attempts", min=1, help="Simulations per candidate, adding replicas each time."
    ),
    tighten_steps: int = typer.Option(
        3, "--tighten-steps", min=0, help="Tries to serve the winner's load on fewer replicas."
    ),
    tighten_margin: float = typer.Option(
        0.1,
        "--tighten-margin",
        help="A tightened fleet must also pass its peak hour at this much more load (0.1).",
    ),
    growth_check: bool = typer.Option(
        True,
        "--growth-check/--no-growth-check",
        help="Simulate the winner's peak hour at +10% to +100% load: the growth it absorbs.",
    ),
    compare_gpus: bool = typer.Option(
        True,
        "--compare-gpus/--no-compare-gpus",
        help="Also simulate the cheapest candidate of every other GPU type.",
    ),
    workers: int = typer.Option(0, "--workers", min=0, help="Local processes (0: one per core)."),
    dask: str | None = typer.Option(
        None, "--dask", help="Run the sweep on Dask: a scheduler address, or 'local'."
    ),
    engine: str = typer.Option(DEFAULT_ENGINE, "--engine", help="Engine whose calibration to use."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same result)."),
    out: Path | None = typer.Option(None, "--out", help="Write the whole result as JSON here."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Write an interactive chart (HTML): fleet by hour, cost vs P99."
    ),
    save: bool = typer.Option(True, "--save/--no-save", help="Store the recommendation."),
    rows: int = typer.Option(10, "--rows", min=1, help="Alternatives to print."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """The cheapest fleet that meets the P99 targets, verified by simulation, with the
    commitment plan behind it."""
    default_slo = SLO(
        parse_duration("--slo-ttft-p99", slo_ttft),
        parse_duration("--slo-tpot-p99", slo_tpot),
        parse_duration("--slo-e2e-p99", slo_e2e),
    )
    models = _items([model])
    if not models:
        raise UsageError("--model: name the model to serve (`planner catalog models`)")
    constraints = Constraints(
        model=models[0],
        alternative_models=tuple(models[1:]),
        providers=tuple(p.lower() for p in _items(provider)),
        regions=tuple(_items(region)),
        gpus=tuple(_items(gpu)),
        instance_types=tuple(_items(instance_type)),
        precisions=tuple(_items(precision)) or DEFAULT_PRECISIONS,
        max_quality_loss_pct=max_quality_loss,
        tp_degrees=_ints("--tp", tp, DEFAULT_TP),
        max_tp=max_tp,
        max_seqs=_ints("--max-seqs", max_seqs, DEFAULT_MAX_SEQS),
        chunked_prefill=_chunked(chunked_prefill),
        kv_cache=kv_cache,
        purchase_options=_purchase(purchase),
        max_spot_share=max_spot_share,
        spot_classes=tuple(_items(spot_class)),
        spot_interruptions_per_hour=spot_rate,
        budget_usd_per_month=budget,
        min_replicas=min_replicas,
    )
    options = SearchOptions(
        verify_top=verify_top,
        verify_hours=verify_hours,
        max_attempts=max_attempts,
        compare_gpus=compare_gpus,
        growth_check=growth_check,
        tighten_steps=tighten_steps,
        tighten_margin=tighten_margin,
        seed=seed,
        workers=workers,
        dask=dask,
        engine=engine,
    )
    with store_from(ctx) as store:
        with store.session() as session:
            plan_demand = _demand(
                session, dataset, demand, tokens_from, load_scale, start, end, seed
            )
            ensure_list_prices(session)
            prices = latest_prices(session)
            profiles = all_profiles(session)
        slos = class_slos(plan_demand.classes, slo, default_slo)
        request = Request(plan_demand, Targets(slos, min_attainment), constraints, options)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr,
            disable=quiet or not stderr.is_terminal,
            transient=True,
        ) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            result = recommend(
                request,
                prices,
                lambda name: choose_profile(profiles, name, engine),
                progress=progress,
            )
        data = result.to_dict()
        if save:
            with store.session() as session:
                data["id"] = save_recommendation(session, result).id
    if plot is not None:
        from planner.recommend.plot import write_html

        write_html(data, plot)
        data["plot"] = str(plot)
    if out is not None:
        out.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    if as_json:
        print_json(data)
    else:
        _print(result, data.get("id"), rows)
    if result.winner is None:
        raise NoFleetError("no configuration met the targets (see the rejections above)")


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1e3:,.0f}"


def _usd(value: Any) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _print(result: Recommendation, stored_id: int | None, rows: int) -> None:
    d = result.demand
    stdout.print(
        f"demand: {d['source']}: {d['hours']} h, peak {d['peak_requests_per_s']:,.2f} req/s, "
        f"mean {d['mean_requests_per_s']:,.2f} req/s; mean tokens in/out "
        f"{d['mean_input_tokens']:,.0f}/{d['mean_output_tokens']:,.0f}"
    )
    s = result.stats
    stdout.print(
        f"searched {s['candidates']:,} configurations: {s['screened']:,} screened, "
        f"{s['passed_screen']:,} passed, {s['verified']} simulated ({s['simulations']} runs, "
        f"{s['runner']}) in {s['wall_s']:,.1f} s"
    )
    w = result.winner
    if w is not None and result.plan is not None:
        chosen = result.plan["chosen"]
        unit = chosen["commitment_unit"].replace("_", " ")
        stdout.print(
            f"\n[bold]recommended:[/] {w['provider']}/{w['region']} {w['instance_type']} "
            f"({w['gpus_per_instance']} x {w['gpu']}), {w['model']} {w['precision']}, "
            f"TP {w['tp']}, "
            f"max {w['max_seqs']} sequences, chunked prefill "
            + ("on" if w["chunked_prefill"] else "off")
        )
        stdout.print(
            f"  {w['peak_instances']} instances at peak, {w['mean_instances']:.1f} on average; "
            f"simulated P99 TTFT {_ms(w['p99_ttft_s'])} ms, TPOT {_ms(w['p99_tpot_s'])} ms, "
            f"E2E {_ms(w['p99_e2e_s'])} ms"
        )
        stdout.print(
            f"  {_usd(chosen['monthly_usd'])}/month with {chosen['option']}"
            + (
                f" ({chosen['commitment_level']:,.2f} {unit})"
                if chosen["option"] != "on-demand"
                else ""
            )
            + (
                f", {chosen['spot_share']:.0%} of the load above it on spot"
                if chosen["spot_share"]
                else ""
            )
            + f"; all on-demand {_usd(result.plan['all_on_demand_monthly_usd'])} "
            f"(saves {result.plan['savings_vs_on_demand_pct']:.1f}%); "
            f"${w['usd_per_million_tokens']:,.3f} per million tokens"
        )
        growth = w.get("load_headroom")
        if growth is not None:
            holds = growth["holds_up_to"]
            stdout.print(
                f"  as built, the fleet holds the targets at {holds:.0%} of the peak hour's load "
                "(simulated)"
                if holds > 1
                else "  as built, the fleet has no room for more peak load: +10% misses a target"
            )
        for case in result.plan["sensitivity"]:
            stdout.print(
                f"  load {case['load']}: {case['peak_instances']} instances at peak, "
                f"{_usd(case['monthly_usd_with_this_plan'])}/month with this plan, "
                f"{_usd(case['monthly_usd_replanned'])} replanned ({case['replanned_option']})"
            )
    table = Table(
        "#",
        "instance",
        "model",
        "engine",
        "$/month",
        "buy",
        "P99 ms TTFT/TPOT",
        "margin",
        "ok",
        title="alternatives, simulated (--json for all columns)",
    )
    pareto = set(result.pareto)
    for row in result.ranked[:rows]:
        table.add_row(
            str(row["id"]) + ("*" if row["id"] in pareto else ""),
            f"{row['provider']} {row['instance_type']} ({row['gpus_per_instance']}x{row['gpu']})",
            f"{row['model']} {row['precision']} TP{row['tp']}",
            f"{row['max_seqs']} seqs" + (", chunked" if row["chunked_prefill"] else ""),
            _usd(row["monthly_usd"]),
            row["purchase"],
            f"{_ms(row['p99_ttft_s'])}/{_ms(row['p99_tpot_s'])}",
            "-" if row["slo_headroom"] is None else f"{row['slo_headroom']:.0%}",
            "yes" if row["verified"] else "no",
        )
    stdout.print(table)
    stdout.print("* on the cost-vs-P99 Pareto front")
    reasons = result.to_dict()["rejected_by_reason"]
    if reasons:
        stdout.print(
            "rejected: "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(reasons.items()))
            + " (--json lists each with its reason)"
        )
    for row in [r for r in result.rejected if r["stage"] == "verify"][:5]:
        stdout.print(f"  {row['instance_type']} {row['precision']} TP{row['tp']}: {row['detail']}")
    for note in result.notes:
        stderr.print(f"note: {note}", markup=False)
    if stored_id is not None:
        stdout.print(f"stored as recommendation #{stored_id}")


recommendations_app = typer.Typer(help="Stored recommendations: list, show.", no_args_is_help=True)


@recommendations_app.command("list")
@user_errors
def list_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Stored recommendations, oldest first."""
    with store_from(ctx) as store, store.session() as session:
        runs = [brief(run) for run in list_recommendations(session)]
    if as_json:
        print_json(runs)
        return
    table = Table("id", "created", "demand", "model", "winner", "$/month", "buy")
    for r in runs:
        table.add_row(
            str(r["id"]),
            r["created_at"][:19],
            r["demand_source"],
            r["model"],
            r["winner"] or "(none met the targets)",
            _usd(r["monthly_usd"]),
            r["purchase"] or "-",
        )
    stdout.print(table)


@recommendations_app.command("show")
@user_errors
def show_command(
    ctx: typer.Context,
    recommendation_id: int = typer.Argument(..., help="Recommendation id."),
    plot: Path | None = typer.Option(None, "--plot", help="Write its chart (HTML)."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
) -> None:
    """One stored recommendation."""
    with store_from(ctx) as store, store.session() as session:
        run = load_recommendation(session, recommendation_id)
        data = run.result
        header = brief(run)
    if plot is not None:
        from planner.recommend.plot import write_html

        write_html(data, plot)
    if as_json:
        print_json({**header, "result": data})
        return
    stdout.print(
        f"recommendation #{header['id']} ({header['created_at'][:19]}): {header['demand_source']}"
        f", {header['model']}: {header['winner'] or 'none met the targets'}"
        + (
            f", {_usd(header['monthly_usd'])}/month ({header['purchase']})"
            if header["winner"]
            else ""
        )
    )
    for row in data["ranked"][:10]:
        stdout.print(
            f"  #{row['id']} {row['provider']}/{row['region']}/{row['instance_type']} "
            f"{row['model']} {row['precision']} TP{row['tp']}: {_usd(row['monthly_usd'])}/month, "
            f"P99 TTFT {_ms(row['p99_ttft_s'])} ms, verified {'yes' if row['verified'] else 'no'}"
        )
