"""``planner latency``, ``planner catalog`` and ``planner calibrate``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, stderr, stdout, store_from, user_errors
from planner.errors import UsageError
from planner.latency.calibration import Measurement, calibrate, read_measurements, select
from planner.latency.catalog import load_catalog
from planner.latency.model import DEFAULT_MAX_SEQS, Deployment, LatencyModel
from planner.latency.profile import DEFAULT_ENGINE, Profile
from planner.latency.registry import export_profile, resolve_profile, save_profile
from planner.latency.serving import at_batch, max_batch, max_throughput, steady_state

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON.")
catalog_app = typer.Typer(
    help="What planner knows: GPUs, models, precisions.", no_args_is_help=True
)


def _kv_bytes(kv_cache: str) -> float:
    if kv_cache not in ("fp16", "bf16", "fp8"):
        raise UsageError(f"--kv-cache {kv_cache!r}: expected fp16 or fp8")
    return 1.0 if kv_cache == "fp8" else 2.0


@user_errors
def latency(
    ctx: typer.Context,
    gpu: str = typer.Option(..., "--gpu", help="GPU type (see `planner catalog gpus`)."),
    model: str = typer.Option(..., "--model", help="Model (see `planner catalog models`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16, fp8, int8, int4-awq."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree (GPUs per replica)."),
    batch: int = typer.Option(1, "--batch", min=1, help="Sequences decoding together."),
    input_tokens: int = typer.Option(1024, "--input", min=1, help="Prompt tokens."),
    output_tokens: int = typer.Option(256, "--output", min=1, help="Output tokens."),
    kv_cache: str = typer.Option("fp16", "--kv-cache", help="KV-cache precision: fp16 or fp8."),
    memory_utilization: float = typer.Option(
        0.9, "--memory-utilization", help="Share of GPU memory the engine may use."
    ),
    max_seqs: int = typer.Option(
        DEFAULT_MAX_SEQS, "--max-seqs", min=1, help="Most sequences in a batch."
    ),
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
    if qps is not None and concurrency is not None:
        raise UsageError("--qps and --concurrency are alternatives; give one")
    catalog = load_catalog()
    deployment = Deployment(
        gpu=catalog.gpus.get(gpu),
        model=catalog.models.get(model),
        precision=catalog.precisions.get(precision),
        tp=tp,
        kv_bytes=_kv_bytes(kv_cache),
        memory_utilization=memory_utilization,
    )
    with store_from(ctx) as store, store.session() as session:
        profile = resolve_profile(session, deployment.gpu.name, engine, profile_name)
    lat_model = LatencyModel(deployment, profile)
    capacity = deployment.kv_capacity_tokens
    fits = max_batch(lat_model, input_tokens, output_tokens, max_seqs)
    single = at_batch(lat_model, input_tokens, output_tokens, batch)
    throughput = max_throughput(lat_model, input_tokens, output_tokens, max_seqs)
    loaded = None
    if qps is not None:
        loaded = steady_state(lat_model, input_tokens, output_tokens, "qps", qps, max_seqs)
    elif concurrency is not None:
        loaded = steady_state(
            lat_model, input_tokens, output_tokens, "concurrency", concurrency, max_seqs
        )
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
    table = Table(
        "GPU", "memory GB", "bandwidth GB/s", "BF16 TFLOPS", "FP8 TFLOPS", "INT8 TOPS", "link GB/s"
    )
    for g in gpus:
        peak = g.peak_tflops
        table.add_row(
            g.name,
            f"{g.memory_gb:g}",
            f"{g.mem_bw_gbps:g}",
            _opt(peak.get("bf16_tflops") or peak.get("fp16_tflops")),
            _opt(peak.get("fp8_tflops")),
            _opt(peak.get("int8_tops")),
            f"{g.link_gbps:g} ({g.interconnect})",
        )
    stdout.print(table)
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
    table = Table("model", "params", "active", "layers", "hidden", "heads / KV heads", "experts")
    for m in models:
        table.add_row(
            m.name,
            f"{m.total_params / 1e9:.2f}B",
            f"{m.active_params / 1e9:.2f}B",
            str(m.layers),
            str(m.hidden_size),
            f"{m.attention_heads} / {m.kv_heads}",
            f"{m.experts_per_token} of {m.experts}" if m.is_moe else "-",
        )
    stdout.print(table)


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
    as_json: bool = JSON_OPTION,
) -> None:
    """Fit a calibration profile to measured latencies and report its error before and after."""
    catalog = load_catalog()
    gpu_name = catalog.gpus.get(gpu).name if gpu else None
    points: list[Measurement] = []
    excluded = []
    for path in measurements:
        read, skipped = read_measurements(path, catalog)
        points += read
        excluded += skipped
    chosen = select(points, engine=engine, gpu=gpu_name)
    if not chosen:
        raise UsageError(
            f"no measurements for engine {engine!r}" + (f" on {gpu_name}" if gpu_name else "")
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
        sources = [str(p) for p in measurements]
        save_profile(session, report, sources)
    if export is not None:
        export_profile(export, report, sources)
    summary = report.summary()
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
                f"{row[k]:,.1f} ({row[k] / m - 1:+.0%})"
                for k in ("before_ms", "heldout_ms", "after_ms")
            ),
        )
    stdout.print(table)
    for label, key in [
        ("before fitting", "before_all"),
        ("held-out points", "heldout_test"),
        ("after fitting", "after_all"),
    ]:
        s = summary[key]
        stdout.print(
            f"{label}: {s['points']} points, MAPE {s['mape']:.1%}, median {s['median_ape']:.1%}, "
            f"worst {s['worst_ape']:.1%} ({escape(s['worst_point'])})"
        )
    for item in summary["excluded"]:
        stderr.print(f"excluded row {item['row']}: {item['reason']}", markup=False)
    stdout.print(
        f"stored profile [bold]{escape(name)}[/]: "
        + ", ".join(f"{k}={v:.4g}" for k, v in report.profile.params().items())
    )
