"""``planner latency``, ``planner catalog`` and ``planner calibrate``."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table
from sqlalchemy.orm import Session

from planner.cli.context import print_json, stderr, stdout, store_from, user_errors
from planner.cli.tables import Column, print_table
from planner.common.text import shown
from planner.errors import PlannerError, UsageError
from planner.latency.calibration import (
    ErrorSummary,
    Measurement,
    calibrate,
    compare_fit,
    errors_under,
    finite_or_none,
    percent,
    read_measurements,
    select,
)
from planner.latency.catalog import load_catalog
from planner.latency.model import DEFAULT_MAX_SEQS, Deployment, LatencyModel
from planner.latency.profile import DEFAULT_ENGINE, Profile, ProfileError
from planner.latency.registry import export_profile, read_export, resolve_profile, save_profile
from planner.latency.serving import (
    RequestLatency,
    SaturatedError,
    at_batch,
    max_batch,
    max_throughput,
    saturation_qps,
    steady_state,
)

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON.")
catalog_app = typer.Typer(
    help="What planner knows: GPUs, models, precisions.", no_args_is_help=True
)


MAX_COUNT = 1_000_000_000  # more tokens, sequences or clients than any deployment sees
MAX_TP = 1024


def _kv_bytes(kv_cache: str) -> float:
    if kv_cache not in ("fp16", "bf16", "fp8"):
        raise UsageError(f"--kv-cache {shown(kv_cache)}: expected fp16 or fp8")
    return 1.0 if kv_cache == "fp8" else 2.0


def _digits(value: int) -> str:
    """An integer for a message: a 400-digit one is cut."""
    text = str(value)
    return text if len(text) <= 20 else f"{text[:20]}... ({len(text)} digits)"


def _count(option: str, value: int | None, what: str, most: int = MAX_COUNT) -> None:
    if value is not None and not 1 <= value <= most:
        raise UsageError(
            f"{option} {_digits(value)}: expected a whole number of {what} from 1 to {most:,}"
        )


def _check_options(
    tp: int,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    memory_utilization: float,
    max_seqs: int,
    qps: float | None,
    concurrency: int | None,
) -> None:
    """Every number a user typed, before any work: non-finite, non-positive and absurd values
    are refused with the option's name (Typer takes 'nan' and 'inf' for a float)."""
    if qps is not None and concurrency is not None:
        raise UsageError("--qps and --concurrency are alternatives; give one")
    _count("--tp", tp, "GPUs", MAX_TP)
    _count("--batch", batch, "sequences")
    _count("--input", input_tokens, "tokens")
    _count("--output", output_tokens, "tokens")
    _count("--max-seqs", max_seqs, "sequences")
    _count("--concurrency", concurrency, "clients")
    if not (math.isfinite(memory_utilization) and 0.1 <= memory_utilization <= 1.0):
        raise UsageError(
            f"--memory-utilization {memory_utilization:g}: expected a share of GPU memory "
            "from 0.1 to 1.0 (e.g. 0.9)"
        )
    if qps is not None and not (math.isfinite(qps) and qps > 0):
        raise UsageError(f"--qps {qps:g}: expected a positive, finite number of requests/s")


def _check_shape(deployment: Deployment, input_tokens: int, output_tokens: int) -> None:
    """A request longer than the model's context window has no latency to predict."""
    total = input_tokens + output_tokens
    context = deployment.model.max_context
    if total > context:
        raise UsageError(
            f"--input {input_tokens} + --output {output_tokens} = {total:,} tokens exceed the "
            f"{context:,}-token context of {deployment.model.name}"
        )


def _check_batch(deployment: Deployment, input_tokens: int, output_tokens: int, batch: int) -> None:
    """A batch whose KV cache does not fit cannot decode together: say how many can."""
    per_sequence = input_tokens + output_tokens
    need = batch * per_sequence
    capacity = deployment.kv_capacity_tokens
    if need > capacity:
        raise UsageError(
            f"--batch {batch}: {batch:,} sequences of {per_sequence:,} tokens need {need:,} "
            f"tokens of KV cache; this deployment holds {capacity:,}: at most "
            f"{capacity // per_sequence:,} "
            "sequences run at once (use a smaller --batch, --kv-cache fp8, more GPUs with "
            "--tp, or a larger GPU)"
        )


def _round_down(value: float, digits: int = 3) -> float:
    """``value`` cut (not rounded) to ``digits`` significant digits: a capacity shown is one
    the deployment serves."""
    if value <= 0:
        return 0.0
    scale = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return math.floor(value / scale) * scale


def _under_qps(
    lat_model: LatencyModel, input_tokens: int, output_tokens: int, qps: float, max_seqs: int
) -> RequestLatency:
    try:
        return steady_state(lat_model, input_tokens, output_tokens, "qps", qps, max_seqs)
    except SaturatedError as exc:
        edge = _round_down(saturation_qps(lat_model, input_tokens, output_tokens, max_seqs))
        raise PlannerError(
            f"--qps {qps:g}: more than this deployment can serve: it saturates above about "
            f"{edge:g} req/s of {input_tokens}-in / {output_tokens}-out requests ({exc}), "
            "so queues would grow without bound; give a lower --qps, or add GPUs (--tp) or "
            "replicas (`planner simulate --replicas`)"
        ) from None


@user_errors
def latency(
    ctx: typer.Context,
    gpu: str = typer.Option(..., "--gpu", help="GPU type (see `planner catalog gpus`)."),
    model: str = typer.Option(..., "--model", help="Model (see `planner catalog models`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16, fp8, int8, int4-awq."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree (GPUs per replica)."),
    batch: int = typer.Option(1, "--batch", help="Sequences decoding together."),
    input_tokens: int = typer.Option(1024, "--input", help="Prompt tokens."),
    output_tokens: int = typer.Option(256, "--output", help="Output tokens."),
    kv_cache: str = typer.Option("fp16", "--kv-cache", help="KV-cache precision: fp16 or fp8."),
    memory_utilization: float = typer.Option(
        0.9, "--memory-utilization", help="Share of GPU memory the engine may use (0.1 to 1)."
    ),
    max_seqs: int = typer.Option(DEFAULT_MAX_SEQS, "--max-seqs", help="Most sequences in a batch."),
    qps: float | None = typer.Option(
        None, "--qps", help="Also: mean latencies under this Poisson load (requests/s)."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Also: mean latencies with this many closed-loop clients."
    ),
    engine: str = typer.Option(DEFAULT_ENGINE, "--engine", help="Engine whose calibration to use."),
    profile_name: str | None = typer.Option(
        None, "--profile", help="Calibration profile (default: best for GPU and engine)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Predict TTFT, time per output token and end-to-end latency, KV capacity and throughput."""
    _check_options(
        tp, batch, input_tokens, output_tokens, memory_utilization, max_seqs, qps, concurrency
    )
    catalog = load_catalog()
    deployment = Deployment(
        gpu=catalog.gpus.get(gpu),
        model=catalog.models.get(model),
        precision=catalog.precisions.get(precision),
        tp=tp,
        kv_bytes=_kv_bytes(kv_cache),
        memory_utilization=memory_utilization,
    )
    _check_shape(deployment, input_tokens, output_tokens)
    with store_from(ctx) as store, store.session() as session:
        profile = resolve_profile(session, deployment.gpu.name, engine, profile_name)
    lat_model = LatencyModel(deployment, profile)
    capacity = deployment.kv_capacity_tokens
    fits = max_batch(lat_model, input_tokens, output_tokens, max_seqs)
    _check_batch(deployment, input_tokens, output_tokens, batch)
    single = at_batch(lat_model, input_tokens, output_tokens, batch)
    throughput = max_throughput(lat_model, input_tokens, output_tokens, max_seqs)
    loaded = None
    queued = 0
    if qps is not None:
        loaded = _under_qps(lat_model, input_tokens, output_tokens, qps, max_seqs)
    elif concurrency is not None:
        loaded = steady_state(
            lat_model, input_tokens, output_tokens, "concurrency", concurrency, max_seqs
        )
        queued = max(0, concurrency - fits)
    result: dict[str, Any] = {
        "gpu": deployment.gpu.name,
        "model": deployment.model.name,
        "precision": deployment.precision.name,
        "tp": tp,
        "kv_cache": kv_cache,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "batch": batch,
        "profile": profile.name,
        "ttft_ms": single.ttft_ms,
        "tpot_ms": single.tpot_ms,
        "e2e_ms": single.e2e_ms,
        "weights_gb_per_gpu": deployment.weight_bytes_per_gpu / 1e9,
        "kv_capacity_tokens": capacity,
        "max_concurrent_sequences": fits,
        "max_output_tokens_per_s": throughput["output_tokens_per_s"],
        "max_requests_per_s": throughput["requests_per_s"],
        "quality_delta_pct": deployment.precision.quality_delta_pct,
        "under_load": None
        if loaded is None
        else {
            "kind": "qps" if qps is not None else "concurrency",
            "load": qps if qps is not None else concurrency,
            **loaded.to_dict(),
            **({"queued_clients": queued} if concurrency is not None else {}),
        },
    }
    if as_json:
        print_json(result)
        return
    stdout.print(
        f"[bold]{deployment.model.name}[/] {deployment.precision.name} "
        f"on {tp} x {deployment.gpu.name} "
        f"(profile {escape(profile.name)}), {input_tokens} in / {output_tokens} out, batch {batch}"
    )
    table = Table("", "value")
    table.add_row("TTFT", f"{single.ttft_ms:,.1f} ms")
    table.add_row("time per output token", f"{single.tpot_ms:,.2f} ms")
    table.add_row("end-to-end", f"{single.e2e_ms:,.0f} ms")
    table.add_row("weights per GPU", f"{result['weights_gb_per_gpu']:,.1f} GB")
    table.add_row("KV-cache capacity", f"{capacity:,} tokens ({fits} sequences of this shape)")
    table.add_row(
        "max throughput",
        f"{throughput['output_tokens_per_s']:,.0f} output tokens/s "
        f"({throughput['requests_per_s']:,.2f} req/s)",
    )
    if loaded is not None:
        load = f"{qps:g} req/s" if qps is not None else f"{concurrency} clients"
        table.add_row(f"at {load}: mean TTFT", f"{loaded.ttft_ms:,.1f} ms")
        table.add_row(
            f"at {load}: mean TPOT", f"{loaded.tpot_ms:,.2f} ms (batch {loaded.batch:.0f})"
        )
        if queued:
            table.add_row(
                f"at {load}: queueing",
                f"{queued:,} of the {concurrency:,} clients wait for a slot "
                f"(at most {fits} sequences run at once; the wait is in the TTFT)",
            )
    if deployment.precision.quality_delta_pct:
        table.add_row(
            "quality vs BF16",
            f"{deployment.precision.quality_delta_pct:+.1f}% (see `planner catalog precisions`)",
        )
    stdout.print(table)


@catalog_app.command("gpus")
@user_errors
def catalog_gpus(as_json: bool = JSON_OPTION) -> None:
    """GPUs: memory, bandwidth, dense peaks, interconnect, sources."""
    gpus = load_catalog().gpus.entries
    if as_json:
        print_json([asdict(g) for g in gpus])
        return
    peaks = [g.peak_tflops for g in gpus]
    print_table(
        [
            Column("GPU", [g.name for g in gpus]),
            Column("memory GB", [f"{g.memory_gb:g}" for g in gpus], justify="right"),
            Column("bandwidth GB/s", [f"{g.mem_bw_gbps:g}" for g in gpus], justify="right"),
            Column(
                "BF16 TFLOPS",
                [_opt(p.get("bf16_tflops") or p.get("fp16_tflops")) for p in peaks],
                justify="right",
            ),
            Column("FP8 TFLOPS", [_opt(p.get("fp8_tflops")) for p in peaks], justify="right"),
            Column("INT8 TOPS", [_opt(p.get("int8_tops")) for p in peaks], 2, "right"),
            Column("link GB/s", [f"{g.link_gbps:g} ({g.interconnect})" for g in gpus], 1),
        ]
    )
    stdout.print("dense peaks (no sparsity); every figure's source: `planner catalog gpus --json`")


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@catalog_app.command("models")
@user_errors
def catalog_models(as_json: bool = JSON_OPTION) -> None:
    """Models: architecture from their published configs, total and active parameters."""
    models = load_catalog().models.entries
    if as_json:
        print_json(
            [
                {**asdict(m), "total_params": m.total_params, "active_params": m.active_params}
                for m in models
            ]
        )
        return
    print_table(
        [
            Column("model", [m.name for m in models]),
            Column("params", [f"{m.total_params / 1e9:.2f}B" for m in models], justify="right"),
            Column("active", [f"{m.active_params / 1e9:.2f}B" for m in models], justify="right"),
            Column("layers", [str(m.layers) for m in models], 2, "right"),
            Column("hidden", [str(m.hidden_size) for m in models], 3, "right"),
            Column("heads / KV heads", [f"{m.attention_heads} / {m.kv_heads}" for m in models], 1),
            Column(
                "experts",
                [f"{m.experts_per_token} of {m.experts}" if m.is_moe else "-" for m in models],
            ),
        ]
    )


@catalog_app.command("precisions")
@user_errors
def catalog_precisions(as_json: bool = JSON_OPTION) -> None:
    """Precisions: weight size, compute units used, quality delta vs BF16 and its source."""
    precisions = load_catalog().precisions.entries
    if as_json:
        print_json([{**asdict(p), "weight_bytes": p.weight_bytes} for p in precisions])
        return
    table = Table("precision", "bytes/weight", "matmul peak", "quality vs BF16")
    for p in precisions:
        table.add_row(
            p.name, f"{p.weight_bytes:.3f}", p.compute_peak, f"{p.quality_delta_pct:+.1f}%"
        )
    stdout.print(table)


MAX_NAME = 200  # the store's column widths
MAX_ENGINE = 64


def _check_name(option: str, value: str, most: int) -> None:
    if not value.strip() or not value.isprintable() or len(value) > most:
        quoted = f" {shown(value)}" if value else ""
        raise UsageError(f"{option}{quoted}: expected a name of 1 to {most} printable characters")


def _baseline(session: Session, gpu: str | None, engine: str) -> Profile:
    """The profile a fitted one would replace: what `planner latency` uses now for this GPU
    (or, fitting every GPU, the engine's GPU-independent profile), else the built-in defaults."""
    try:
        return resolve_profile(session, gpu or "", engine)
    except ProfileError:
        return Profile("built-in defaults", engine, gpu)


@user_errors
def calibrate_command(
    ctx: typer.Context,
    measurements: list[Path] = typer.Argument(
        ..., help="Measurement CSV files (layout of data/reference/published_latency.csv)."
    ),
    name: str = typer.Option(..., "--name", help="Name of the fitted profile."),
    engine: str = typer.Option(
        DEFAULT_ENGINE, "--engine", help="Fit the measurements of this engine."
    ),
    gpu: str | None = typer.Option(
        None, "--gpu", help="Fit one GPU's measurements only (default: all GPUs)."
    ),
    holdout: float = typer.Option(
        0.3, "--holdout", help="Share of points held out to measure error."
    ),
    start: str | None = typer.Option(
        None, "--start", help="Profile to start from (default: built-in guesses)."
    ),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="Also write the profile into this JSON file (e.g. data/calibration/profiles.json).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Store the fit even when it is worse than the profile it replaces.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Fit a calibration profile to measured latencies and report its error before and after;
    a fit worse than the profile planner uses now on the same points is not stored unless
    --force."""
    _check_name("--name", name, MAX_NAME)
    _check_name("--engine", engine, MAX_ENGINE)
    if not (math.isfinite(holdout) and 0 <= holdout < 1):
        raise UsageError(f"--holdout {holdout:g}: expected a fraction in [0, 1), e.g. 0.3")
    catalog = load_catalog()
    gpu_name = catalog.gpus.get(gpu).name if gpu is not None else None
    export_payload = read_export(export) if export is not None else None
    points: list[Measurement] = []
    excluded = []
    for path in measurements:
        read, skipped = read_measurements(path, catalog)
        points += read
        excluded += skipped
    chosen = select(points, engine=engine, gpu=gpu_name)
    if not chosen:
        engines = sorted({p.engine for p in points if gpu_name is None or p.gpu == gpu_name})
        raise UsageError(
            f"no measurements for engine {shown(engine)}"
            + (f" on {gpu_name}" if gpu_name else "")
            + (f"; the files measure {', '.join(shown(e) for e in engines)}" if engines else "")
        )
    with store_from(ctx) as store, store.session() as session:
        base = resolve_profile(session, gpu_name or "", engine, start) if start else Profile(name)
        report = calibrate(
            chosen,
            Profile(name, engine, gpu_name, **base.params()),
            excluded=excluded,
            holdout=holdout,
            catalog=catalog,
        )
        baseline = _baseline(session, gpu_name, engine)
        after = ErrorSummary.of(report.after)
        in_use = errors_under(report.points, baseline, catalog)
        problem = compare_fit(after.mape, in_use.mape, baseline.name)
        if problem is not None:
            if not force or not math.isfinite(after.mape):
                hint = "" if not math.isfinite(after.mape) else "; store it anyway with --force"
                raise PlannerError(f"{problem}; profile {shown(name)} not stored{hint}")
            stderr.print(f"warning: {problem}; stored anyway (--force)", markup=False)
        sources = [str(p) for p in measurements]
        save_profile(session, report, sources)
        if export is not None:  # inside the transaction: a failed write stores nothing
            export_profile(export, report, sources, export_payload)
    summary = {
        **report.summary(),
        "baseline_profile": baseline.name,
        "baseline_all": finite_or_none(asdict(in_use)),
    }
    if as_json:
        print_json(summary)
        return
    table = Table("point", "split", "measured ms", "before", "held-out fit", "after")
    for row in summary["per_point"]:
        m = row["measured_ms"]
        table.add_row(
            escape(row["key"]),
            row["split"],
            f"{m:,.1f}",
            *(
                "saturated"
                if row[k] is None
                else f"{row[k]:,.1f} ({'+' if row[k] >= m else ''}{percent(row[k] / m - 1)})"
                for k in ("before_ms", "heldout_ms", "after_ms")
            ),
        )
    stdout.print(table)
    for label, key in [
        (f"{baseline.name} (in use now)", "baseline_all"),
        ("before fitting", "before_all"),
        ("held-out points", "heldout_test"),
        ("after fitting", "after_all"),
    ]:
        s = summary[key]
        if not s["points"] or s["mape"] is None:
            stdout.print(f"{escape(label)}: none" if not s["points"] else f"{label}: saturated")
            continue
        stdout.print(
            f"{escape(label)}: {s['points']} points, MAPE {percent(s['mape'])}, "
            f"median {percent(s['median_ape'])}, worst {percent(s['worst_ape'])} "
            f"({escape(s['worst_point'])})"
        )
    for item in summary["excluded"]:
        stderr.print(f"excluded row {item['row']}: {item['reason']}", markup=False)
    stdout.print(
        f"stored profile [bold]{escape(name)}[/]: "
        + ", ".join(f"{k}={v:.4g}" for k, v in report.profile.params().items())
    )
