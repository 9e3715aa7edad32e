"""``planner latency``, ``planner catalog`` and ``planner calibrate``."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from planner.cli.context import print_json, sessions_from, stderr, stdout, user_errors
from planner.cli.options import (
    ENGINE_OPTION,
    GPU_MEMORY_UTILIZATION_OPTION,
    JSON_OPTION,
    KV_CACHE_OPTION,
    LATENCY_SIM_REQUESTS,
    SCHEDULER_OPTION,
)
from planner.cli.tables import Column, print_table, print_whole
from planner.errors import UsageError
from planner.latency.profile import DEFAULT_ENGINE

if TYPE_CHECKING:
    from planner.latency.catalog import GPU, ModelSpec
    from planner.latency.model import Deployment
    from planner.latency.profile import Profile
    from planner.usecases.calibrate import CalibrateResult

catalog_app = typer.Typer(
    help="What planner knows: GPUs, models, precisions.", no_args_is_help=True
)


def memory_utilization_option(value: float | None, alias: float | None) -> float | None:
    """``--gpu-memory-utilization``, or its older name ``--memory-utilization``."""
    from planner.latency.predict import check_memory_utilization

    if value is not None and alias is not None and value != alias:
        raise UsageError(
            "--gpu-memory-utilization and --memory-utilization are the same option; give one"
        )
    chosen = value if value is not None else alias
    check_memory_utilization(chosen)
    return chosen


@user_errors
def latency(
    ctx: typer.Context,
    gpu: str = typer.Option(..., "--gpu", help="GPU type (see `planner catalog gpus`)."),
    model: str = typer.Option(..., "--model", help="Model (see `planner catalog models`)."),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16, fp8, int8, int4-awq."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree (GPUs per replica)."),
    ep: int = typer.Option(
        1,
        "--ep",
        help="Expert parallelism of a mixture of experts: 1 (experts split by TP) or --tp "
        "(each GPU holds whole experts).",
    ),
    prefill_tp: int | None = typer.Option(
        None,
        "--prefill-tp",
        help="Disaggregated: GPUs of the prefill instance (default --tp); the request is then "
        "also shown prefilled there, its KV cache sent over --kv-link and decoded apart.",
    ),
    decode_tp: int | None = typer.Option(
        None, "--decode-tp", help="Disaggregated: GPUs of the decode instance (default --tp)."
    ),
    kv_link: str | None = typer.Option(
        None,
        "--kv-link",
        help="Disaggregated: what the KV cache crosses (data/catalog/links.csv, e.g. "
        "aws-p5-efa); default the GPU's NVLink when both roles fit one node.",
    ),
    first_token: str | None = typer.Option(
        None,
        "--first-token",
        metavar="decode|prefill",
        help="Disaggregated: which role yields the first token (default: by engine).",
    ),
    batch: int = typer.Option(1, "--batch", help="Sequences decoding together."),
    static: bool = typer.Option(
        False,
        "--static",
        help="With --batch: static batching (the batch prefilled together, then decoded "
        "together) instead of one request joining a continuous batch.",
    ),
    input_tokens: int = typer.Option(1024, "--input", help="Prompt tokens."),
    output_tokens: int = typer.Option(256, "--output", help="Output tokens."),
    engine: str = ENGINE_OPTION,
    scheduler: str | None = SCHEDULER_OPTION,
    kv_cache: str | None = KV_CACHE_OPTION,
    memory_utilization: float | None = GPU_MEMORY_UTILIZATION_OPTION,
    memory_utilization_alias: float | None = typer.Option(
        None, "--memory-utilization", hidden=True
    ),
    max_seqs: int | None = typer.Option(
        None, "--max-seqs", help="Most sequences in a batch (default: the engine's)."
    ),
    qps: float | None = typer.Option(
        None, "--qps", help="Also: latencies under this Poisson load (requests/s)."
    ),
    concurrency: int | None = typer.Option(
        None,
        "--concurrency",
        help="Also: latencies with this many closed-loop clients (the model's means, and the "
        "simulated closed loop's percentiles).",
    ),
    client_start: str | None = typer.Option(
        None,
        "--client-start",
        help="With --concurrency: how the simulated clients send: synchronized (start "
        "together, then run free; default), staggered (starts spread over one request's time) "
        "or waves (lock-step, as GenAI-Perf's and AIPerf's identical requests).",
    ),
    think_time: str | None = typer.Option(
        None,
        "--think-time",
        help="With --concurrency: a client's pause between a response and its next request, "
        "e.g. 500ms (default 0; the model's means assume none).",
    ),
    sim_requests: int = typer.Option(
        LATENCY_SIM_REQUESTS,
        "--sim-requests",
        help="With --qps or --concurrency: requests the simulator runs for P50/P90/P99 (0: no "
        "simulation).",
    ),
    seed: int = typer.Option(0, "--seed", min=0, help="Random seed of the simulated arrivals."),
    profile_name: str | None = typer.Option(
        None, "--profile", help="Calibration profile (default: best for GPU and engine)."
    ),
    confidence: str = typer.Option(
        "0.9",
        "--confidence",
        help="With --qps or --concurrency: each simulated percentile with its interval at this "
        "confidence (the engine's held-out error on this GPU class, plus the sampling error); "
        "default 0.9; 0 or none: no intervals.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Predict TTFT, time per output token and end-to-end latency, memory, KV capacity and
    throughput; with --qps or --concurrency, also latency percentiles from the simulator."""
    from planner.latency.predict import LatencyQuery, check_numbers
    from planner.latency.uncertainty import parse_confidence
    from planner.simulate.inputs import parse_duration
    from planner.usecases.predict import ClientOptions, predict_latency

    query = LatencyQuery(
        gpu=gpu,
        model=model,
        precision=precision,
        tp=tp,
        batch=batch,
        static=static,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        engine=engine,
        kv_cache=kv_cache,
        max_seqs=max_seqs,
        qps=qps,
        concurrency=concurrency,
        sim_requests=sim_requests,
        seed=seed,
        profile=profile_name,
        scheduler=scheduler,
        ep=ep,
        prefill_tp=prefill_tp,
        decode_tp=decode_tp,
        kv_link=kv_link,
        first_token=first_token,
    )
    check_numbers(query)  # before the --memory-utilization alias, as always
    utilization = memory_utilization_option(memory_utilization, memory_utilization_alias)
    clients = None
    if client_start is not None or think_time is not None:
        think = parse_duration("--think-time", think_time) or 0.0
        clients = ClientOptions((client_start or "synchronized").strip().lower(), think)
    level = parse_confidence(confidence)
    with sessions_from(ctx) as sessions:
        prediction = predict_latency(
            replace(query, memory_utilization=utilization),
            sessions,
            clients=clients,
            confidence=level,
        )
    if as_json:
        print_json(prediction.result)
        return
    _print_latency(prediction.result, prediction.deployment, prediction.profile)
    if prediction.result.get("disaggregated"):
        _print_disaggregated(prediction.result["disaggregated"])


def _print_disaggregated(d: dict[str, Any]) -> None:
    """The same request disaggregated: each stage of its TTFT, the transfer's share."""
    stdout.print(
        f"[bold]disaggregated[/]: prefill on TP {d['prefill_tp']}, decode on TP "
        f"{d['decode_tp']} in a batch of {d['decode_batch']}, KV cache "
        f"{d['kv_bytes'] / 2**20:,.1f} MiB over {escape(d['link'])} "
        f"({escape(d['link_transport'])}), first token from the {d['first_token']} side"
    )
    stdout.print(
        f"  TTFT {d['ttft_ms']:,.1f} ms = prefill {d['prefill_ms']:,.1f} + transfer "
        f"{d['transfer_ms']:,.1f} ({d['transfer_share_of_ttft']:.1%}) + first decode step "
        f"{d['first_step_ms']:,.1f}; TPOT {d['tpot_ms']:,.1f} ms; end-to-end "
        f"{d['e2e_ms']:,.0f} ms"
    )


def _print_latency(result: dict[str, Any], deployment: Deployment, profile: Profile) -> None:
    batch = result["batch"]
    batching = (
        f"static batch of {batch}"
        if result["batching"] == "static"
        else f"batch {batch} (continuous batching)"
    )
    stdout.print(
        f"[bold]{deployment.model.name}[/] {deployment.precision.name} "
        f"on {result['tp']} x {deployment.gpu.name} with {result['engine']} "
        f"(profile {escape(profile.name)}), {result['input_tokens']} in / "
        f"{result['output_tokens']} out, {batching}"
    )
    table = Table("", "value")
    _single_rows(table, result)
    loaded = result["under_load"]
    if loaded is not None:
        _load_rows(table, result, loaded)
    if deployment.precision.quality_delta_pct:
        table.add_row(
            "quality vs BF16",
            f"{deployment.precision.quality_delta_pct:+.1f}% (see `planner catalog precisions`)",
        )
    print_whole(table)
    if loaded is not None:
        _print_percentiles(result, loaded)


def _single_rows(table: Table, result: dict[str, Any]) -> None:
    """One request's latencies, each GPU's memory, the KV cache and the most throughput."""
    memory = result["memory"]
    table.add_row("TTFT", f"{result['ttft_ms']:,.1f} ms")
    table.add_row("time per output token", f"{result['tpot_ms']:,.2f} ms")
    table.add_row("end-to-end", f"{result['e2e_ms']:,.0f} ms")
    table.add_row(
        "GPU memory",
        f"{memory['device_gib']:,.1f} GiB per GPU; {escape(result['engine'])} gives "
        f"{escape(result['memory_rule'])}",
    )
    table.add_row("  weights", f"{memory['weights_gib']:,.1f} GiB per GPU")
    table.add_row("  activations + runtime", f"{memory['activations_gib']:,.1f} GiB per GPU")
    table.add_row(
        "  KV cache",
        f"{memory['kv_cache_gib']:,.1f} GiB per GPU = {result['kv_capacity_tokens']:,} tokens "
        f"({result['max_concurrent_sequences']} sequences of this shape)",
    )
    table.add_row(
        "KV-cache precision", f"{result['kv_cache']} ({escape(result['kv_cache_source'])})"
    )
    table.add_row(
        "max throughput",
        f"{result['max_output_tokens_per_s']:,.0f} output tokens/s "
        f"({result['max_requests_per_s']:,.2f} req/s)",
    )


def _load_rows(table: Table, result: dict[str, Any], loaded: dict[str, Any]) -> None:
    """The steady-state means under the load, or its saturation and what would serve it."""
    qps = loaded["kind"] == "qps"
    load = f"{loaded['load']:g} req/s" if qps else f"{loaded['load']} clients"
    if loaded["saturated"]:
        table.add_row(
            f"at {load}",
            f"SATURATED: capacity about {loaded['capacity_qps']:g} req/s of this shape "
            f"({escape(loaded['reason'])}); queues would grow without bound",
        )
        table.add_row("  to serve it", "; or ".join(escape(o) for o in loaded["options"]))
    else:
        table.add_row(f"at {load}: mean TTFT", f"{loaded['ttft_ms']:,.1f} ms")
        table.add_row(
            f"at {load}: mean TPOT",
            f"{loaded['tpot_ms']:,.2f} ms (batch {loaded['batch']:.0f})",
        )
        table.add_row(f"at {load}: mean end-to-end", f"{loaded['e2e_ms']:,.0f} ms")
        if qps and result["capacity_qps"] is not None:
            table.add_row("  capacity", f"about {result['capacity_qps']:g} req/s")
    if loaded.get("queued_clients"):
        table.add_row(
            f"at {load}: queueing",
            f"{loaded['queued_clients']:,} of the {loaded['load']:,} clients wait for a "
            f"slot (at most {result['max_concurrent_sequences']} sequences run at once; "
            "the wait is in the TTFT)",
        )


def _print_percentiles(result: dict[str, Any], loaded: dict[str, Any]) -> None:
    """The simulator's percentiles under the load beside the model's means, or why none."""
    sim = loaded["percentiles"]
    if sim is None:
        stdout.print(f"percentiles: {escape(loaded['percentiles_note'])}")
        return
    spread = Table("under load (ms)", "mean (model)", "mean (sim)", "P50", "P90", "P99")
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end")):
        if key not in sim:
            continue
        row = sim[key]
        spread.add_row(
            label,
            f"{loaded[f'{key}_ms']:,.1f}",
            *(f"{row[q]:,.1f}" for q in ("mean", "p50", "p90", "p99")),
        )
    print_whole(spread)
    _print_intervals(sim)
    if sim["arrivals"] == "closed loop":
        load = (
            f"{sim['requests']:,} requests of a closed loop of {sim['clients']:,} clients "
            f"({sim['client_start']}, think {sim['think_s']:g} s), {sim['excluded']} left out"
        )
    else:
        load = (
            f"{sim['requests']:,} Poisson arrivals at {loaded['load']:g} req/s, "
            f"{sim['excluded']} excluded, seed {result.get('seed', 0)}"
        )
    stdout.print(
        f"percentiles from the discrete-event simulator: {load}; {sim['wall_s']:.2f} s; "
        f"admission {sim['admission']} (from {escape(sim['admission_source'])})"
    )


def _print_intervals(sim: dict[str, Any]) -> None:
    """Each simulated percentile's interval, a table of its own (whole at 80 columns)."""
    if not sim.get("confidence"):
        return
    bands = Table(f"{sim['confidence']:.0%} interval (ms)", "P50", "P90", "P99")
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end")):
        interval = sim.get(key, {}).get("interval", {})
        if interval:
            bands.add_row(
                label,
                *(
                    f"{interval[q]['low']:,.1f}\u2013{interval[q]['high']:,.1f}"
                    if q in interval
                    else "-"
                    for q in ("p50", "p90", "p99")
                ),
            )
    print_whole(bands)
    stdout.print(
        "intervals: the engine's held-out error on this GPU class (docs/accuracy.md) and the "
        "sampling error of the requests simulated (--confidence 0: none)"
    )


def _memory(gpu: GPU) -> str:
    """The vendor's figure with its unit, and the driver's total where published."""
    text = f"{gpu.memory:g} {gpu.memory_unit}"
    if gpu.device_memory_mib is not None:
        text += f" ({gpu.device_memory_mib * 2**20 / 2**30:,.1f} GiB usable)"
    return text


@catalog_app.command("gpus")
@user_errors
def catalog_gpus(as_json: bool = JSON_OPTION) -> None:
    """GPUs: memory (with its unit), bandwidth, dense peaks, interconnect, sources."""
    from planner.latency.catalog import load_catalog

    gpus = load_catalog().gpus.entries
    if as_json:
        print_json(
            [
                {**asdict(g), "memory_gib": g.memory_gib, "memory_bytes": g.memory_bytes}
                for g in gpus
            ]
        )
        return
    peaks = [g.peak_tflops for g in gpus]
    print_table(
        [
            Column("GPU", [g.name for g in gpus]),
            Column("memory", [_memory(g) for g in gpus], justify="right"),
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
    stdout.print(
        "memory: the vendor's figure in its unit (GiB = 2^30 bytes, GB = 10^9), and in "
        "brackets what the driver reports where published; dense peaks (no sparsity); every "
        "figure's source: `planner catalog gpus --json`"
    )


@catalog_app.command("engines")
@user_errors
def catalog_engines(as_json: bool = JSON_OPTION) -> None:
    """Inference engines: how each sizes memory, KV cache and batches by default."""
    from planner.latency.engines import load_engines

    engines = load_engines()
    if as_json:
        print_json([asdict(e) for e in engines])
        return
    print_table(
        [
            Column("engine", [e.name for e in engines]),
            Column(
                "memory",
                [
                    f"{e.memory_fraction:g} of {'free' if e.memory_rule == 'free' else 'total'}"
                    for e in engines
                ],
            ),
            Column(
                "KV cache default",
                [
                    "FP8 under FP8 weights" if e.kv_cache_default == "weights" else "model dtype"
                    for e in engines
                ],
            ),
            Column("max tokens", [f"{e.max_batched_tokens:,}" for e in engines], 1, "right"),
            Column("max seqs", [f"{e.max_seqs:,}" for e in engines], 1, "right"),
            Column("admission", [e.admission for e in engines], 2),
            Column("aliases", [", ".join(e.aliases) or "-" for e in engines], 3),
        ]
    )
    stdout.print(
        "memory: 'of total' = the share of device memory for weights, activations and KV "
        "cache (vLLM, SGLang); 'of free' = the share of what is left after weights and "
        "activations (TensorRT-LLM). Override with --gpu-memory-utilization and --kv-cache."
    )
    for e in engines:
        stdout.print(f"{e.name}: {escape(e.source)}", soft_wrap=True)


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


@catalog_app.command("models")
@user_errors
def catalog_models(as_json: bool = JSON_OPTION) -> None:
    """Models: architecture from their published configs, total and active parameters."""
    from planner.latency.catalog import load_catalog

    models = load_catalog().models.entries
    if as_json:
        print_json(
            [
                {
                    **asdict(m),
                    "total_params": m.total_params,
                    "active_params": m.active_params,
                    "attention": _attention_kind(m),
                    "ep_ready": m.is_moe,
                }
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
            Column("attention", [_attention_kind(m) for m in models], 1),
            Column("experts", [_experts(m) for m in models], 1),
            Column("EP", ["yes" if m.is_moe else "-" for m in models]),
        ]
    )


def _attention_kind(m: ModelSpec) -> str:
    """GQA, MLA (latent + RoPE key) or GQA with windowed layers, in a few words."""
    if m.is_mla:
        return f"MLA {m.kv_lora_rank}+{m.qk_rope_head_dim}"
    if m.sliding_layers:
        return f"GQA, {m.sliding_layers} layers window {m.sliding_window:,}"
    return "GQA"


def _experts(m: ModelSpec) -> str:
    """Routed top-k of the experts, the shared experts and the dense layers, in a few words."""
    if not m.is_moe:
        return "-"
    parts = [f"{m.experts_per_token} of {m.experts}"]
    if m.shared_experts:
        parts.append(f"+ {m.shared_experts} shared")
    if m.dense_mlp_layers:
        parts.append(f"({m.moe_layers} MoE layers)")
    return " ".join(parts)


@catalog_app.command("add-model")
@user_errors
def catalog_add_model(
    config: Path = typer.Option(
        ...,
        "--config",
        help="A Hugging Face config.json (LlamaForCausalLM, MistralForCausalLM, "
        "Qwen2ForCausalLM or MixtralForCausalLM).",
    ),
    name: str | None = typer.Option(
        None, "--name", help="The model's name in planner (default: the config's _name_or_path)."
    ),
    aliases: list[str] = typer.Option(
        [], "--aliases", help="Other names it answers to, comma-separated (or repeat --aliases)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Add a model from its Hugging Face config.json to your catalog
    ($PLANNER_HOME/catalog/models.csv, merged over the bundled one); every command then knows
    it by --name."""
    from planner.usecases.catalog import add_model

    names = [a.strip() for given in aliases for a in given.split(",") if a.strip()]
    added = add_model(config, name, names)
    if as_json:
        print_json(added.to_dict())
        return
    m = added.model
    experts = f", {m.experts_per_token} of {m.experts} experts" if m.is_moe else ""
    replaced = {"bundled": " (replaces the bundled model of that name)", "user": " (updated)"}
    stdout.print(
        f"added [bold]{escape(m.name)}[/]{replaced.get(added.replaced or '', '')}: "
        f"{m.total_params / 1e9:.2f}B parameters, {m.layers} layers, hidden {m.hidden_size}, "
        f"{m.attention_heads} heads / {m.kv_heads} KV heads{experts}, context "
        f"{m.max_context:,}",
        soft_wrap=True,
    )
    stdout.print(f"catalog: {escape(str(added.path))}", soft_wrap=True)


@catalog_app.command("precisions")
@user_errors
def catalog_precisions(as_json: bool = JSON_OPTION) -> None:
    """Precisions: weight size, compute units used, quality delta vs BF16 and its source."""
    from planner.latency.catalog import load_catalog

    precisions = load_catalog().precisions.entries
    if as_json:
        print_json([{**asdict(p), "weight_bytes": p.weight_bytes} for p in precisions])
        return
    table = Table("precision", "bytes/weight", "matmul peak", "quality vs BF16")
    for p in precisions:
        table.add_row(
            p.name, f"{p.weight_bytes:.3f}", p.compute_peak, f"{p.quality_delta_pct:+.1f}%"
        )
    print_whole(table)


@user_errors
def calibrate_command(
    ctx: typer.Context,
    measurements: list[Path] = typer.Argument(
        ...,
        help="Measurement CSV files (layout of data/reference/published_latency.csv); with "
        "--serving, serving results under load (see --serving).",
    ),
    name: str | None = typer.Option(
        None, "--name", help="Name of the fitted profile (required without --serving)."
    ),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help=f"Fit the measurements of this engine (default {DEFAULT_ENGINE}; with --serving, "
        "the files' engine).",
    ),
    gpu: str | None = typer.Option(
        None,
        "--gpu",
        help="Fit one GPU's measurements only (default: all GPUs); with --serving, the GPU "
        "the runs were measured on, where the files do not say.",
    ),
    vendor: str | None = typer.Option(
        None, "--vendor", help="Fit one vendor's GPUs only (NVIDIA, AMD; default: all)."
    ),
    operators: Path | None = typer.Option(
        None,
        "--operators",
        help="Per-operator timings to fit alongside (e.g. data/reference/operator_timings.csv): "
        "they pin the GEMM curve and attention efficiencies.",
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
    serving: bool = typer.Option(
        False,
        "--serving",
        help="The files are serving results under load (planner bench run/import results, "
        "guidellm, vllm bench serve, GenAI-Perf/AIPerf profile exports, inference-perf "
        "stage_N_lifecycle_metrics.json): fit the engine profile by replaying each run.",
    ),
    model: str | None = typer.Option(
        None, "--model", help="--serving: the model served, where the files do not say."
    ),
    precision: str | None = typer.Option(
        None, "--precision", help="--serving: the precision served, where the files do not say."
    ),
    tp: int | None = typer.Option(
        None, "--tp", help="--serving: tensor-parallel GPUs, where the files do not say."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="--serving: write the fitted profile into this profiles file."
    ),
    max_evaluations: int | None = typer.Option(
        None,
        "--max-evaluations",
        help="--serving: the most replays of the runs per fit (default: until it converges).",
    ),
) -> None:
    """Fit a calibration profile to measured latencies and report its error before and after;
    a fit worse than the profile planner uses now on the same points is not stored unless
    --force. With --serving: fit the engine's profile to serving runs under load by replaying
    each run through the simulator, and report the held-out error before and after."""
    from planner.cli.calibrate_serving import calibrate_serving_command, serving_only
    from planner.usecases.calibrate import CalibrateRequest, calibrate

    if serving:
        offline = {"vendor": vendor, "operators": operators, "start": start, "export": export}
        serving_only(serving=True, force=force or None, holdout=holdout, **offline)
        deployment = {"engine": engine, "gpu": gpu, "model": model, "precision": precision}
        calibrate_serving_command(
            measurements, name, deployment, tp, out, max_evaluations, as_json=as_json
        )
        return
    serving_only(model=model, precision=precision, tp=tp, out=out, evaluations=max_evaluations)
    if name is None:
        raise UsageError("--name: give the fitted profile's name (or --serving for serving runs)")
    request = CalibrateRequest(
        measurements=tuple(measurements),
        name=name,
        engine=engine or DEFAULT_ENGINE,
        gpu=gpu,
        vendor=vendor,
        operators=operators,
        holdout=holdout,
        start=start,
        export=export,
        force=force,
    )
    with sessions_from(ctx) as sessions:
        result = calibrate(
            request,
            sessions,
            warn=lambda text: stderr.print(f"warning: {text}", markup=False),
        )
    if as_json:
        print_json(result.summary)
        return
    _print_calibration(result)


def _print_calibration(result: CalibrateResult) -> None:
    from planner.latency.calibration import percent

    summary = result.summary
    table = Table("point", "split", "unit", "measured", "before", "held-out fit", "after")
    for row in summary["per_point"]:
        m = row["measured"]
        table.add_row(
            escape(row["key"]),
            row["split"],
            row["unit"],
            f"{m:,.1f}",
            *(
                "saturated"
                if row[k] is None
                else f"{row[k]:,.1f} ({'+' if row[k] >= m else ''}{percent(row[k] / m - 1)})"
                for k in ("before", "heldout", "after")
            ),
        )
    print_whole(table)
    for label, key in [
        (f"{result.baseline.name} (in use now)", "baseline_all"),
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
    _print_parameters(result)


def _print_parameters(result: CalibrateResult) -> None:
    """The stored profile's parameters, each with its bounds, and a word on those at one."""
    summary = result.summary
    bounds = summary["bounds"]

    def shown_param(key: str, value: float) -> str:
        if key not in bounds:
            return f"{key}={value:.4g} (not fitted)"
        low, high = bounds[key]
        edge = " AT BOUND" if key in summary["at_bound"] else ""
        return f"{key}={value:.4g} [{low:g}..{high:g}]{edge}"

    stdout.print(
        f"stored profile [bold]{escape(result.report.profile.name)}[/]: "
        + ", ".join(shown_param(k, v) for k, v in result.report.profile.params().items()),
        markup=True,
    )
    if summary["at_bound"]:
        stdout.print(
            "parameters at a bound are not identified by these points (the fit wanted to go "
            "further): read them together with the others, or add measurements that vary them"
        )
