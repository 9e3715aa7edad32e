"""``planner bench run`` (measure an OpenAI-compatible server under a load pattern) and
``planner bench serve`` (the model-driven stand-in server on this machine)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import platform
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from planner import __version__
from planner.bench.client import (
    DEFAULT_URL,
    ENDPOINT_PATHS,
    EndpointKind,
    RequestShape,
    Target,
    check_url,
    is_loopback_host,
    is_loopback_url,
    list_models,
)
from planner.bench.loadgen import PATTERNS, LoadPlan, Pattern, RunResult, run_load
from planner.bench.metrics import RequestRecord, SloTargets, summarize, write_run
from planner.bench.server import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    BenchServer,
    Faults,
    ModelEngine,
    check_speed,
)
from planner.cli.context import print_json, stderr, stdout
from planner.cli.options import JSON_OPTION
from planner.common.files import check_output_path
from planner.common.text import shown
from planner.errors import PlannerError, UsageError

METRIC_LABELS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency"))


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    name = value.strip().lower()
    if name not in choices:
        raise UsageError(f"{option} {shown(value)}: expected one of {', '.join(choices)}")
    return name


def load_plan(
    pattern: str,
    *,
    concurrency: int | None,
    rate: float | None,
    requests: int,
    max_seconds: float,
    warmup: int,
    ramp: float,
    seed: int,
) -> LoadPlan:
    """The options of a load pattern, checked together (a rate without a rate pattern is a
    mistake, not something to ignore)."""
    name = cast(Pattern, _check_choice("--pattern", pattern, PATTERNS))
    if name == "concurrency" and concurrency is None:
        raise UsageError("--pattern concurrency needs --concurrency N (clients)")
    if name != "concurrency" and concurrency is not None:
        raise UsageError(
            f"--concurrency goes with --pattern concurrency (--pattern {name} "
            + ("sends one request at a time)" if name == "sync" else "sets a rate instead)")
        )
    if name in ("rate", "poisson") and rate is None:
        raise UsageError(f"--pattern {name} needs --rate (requests per second)")
    if name not in ("rate", "poisson") and rate is not None:
        raise UsageError(f"--rate goes with --pattern rate or poisson, not {name}")
    return LoadPlan(
        pattern=name,
        max_requests=requests,
        max_seconds=max_seconds,
        concurrency=concurrency or 1,
        rate=rate,
        warmup=warmup,
        seed=seed,
        ramp_s=ramp,
    )


def vllm_settings(target: Target, plan: LoadPlan, started: str) -> dict[str, Any]:
    """The run settings ``vllm bench serve --save-result`` writes at the top of its JSON."""
    open_loop = plan.pattern in ("rate", "poisson")
    return {
        "date": started,
        "backend": "openai-chat" if target.endpoint == "chat" else "openai",
        "endpoint_type": "openai-chat" if target.endpoint == "chat" else "openai",
        "model_id": target.model,
        "num_prompts": plan.max_requests,
        "request_rate": plan.rate if open_loop else "inf",
        "burstiness": 1.0 if plan.pattern == "poisson" else None,
        "max_concurrency": None if open_loop else plan.clients,
    }


def run_metadata(
    target: Target,
    shape: RequestShape,
    plan: LoadPlan,
    slo: SloTargets,
    timeout: float,
    result: RunResult,
) -> dict[str, Any]:
    """What planner records about a run beside the numbers."""
    warmup = result.warmup_records
    return {
        "tool": "planner bench run",
        "planner_version": __version__,
        "httpx_version": httpx.__version__,
        "python_version": platform.python_version(),
        "started_at": result.started_at.isoformat(),
        "url": target.base_url,
        "endpoint": ENDPOINT_PATHS[target.endpoint],
        "model": target.model,
        "load": plan.describe(),
        "input_tokens": shape.input_tokens,
        "output_tokens": shape.output_tokens,
        "ignore_eos": shape.exact_output,
        "timeout_s": timeout,
        "slo_ms": slo.to_dict(),
        "stopped": result.stopped,
        "warmup_completed": sum(1 for r in warmup if r.ok),
        "warmup_failed": sum(1 for r in warmup if not r.ok),
    }


@contextlib.contextmanager
def _progress(total: int, show: bool) -> Iterator[Progress]:
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=True,
        disable=not show,
    )
    with progress:
        yield progress


async def _measure(
    base_url: str,
    endpoint: EndpointKind,
    model: str | None,
    api_key: str | None,
    shape: RequestShape,
    plan: LoadPlan,
    timeout: float,
    progress: Progress,
) -> tuple[Target, RunResult]:
    if model is None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(
            timeout=timeout, headers=headers, trust_env=not is_loopback_url(base_url)
        ) as client:
            model = (await list_models(client, base_url))[0]
    target = Target(base_url, endpoint, model, api_key)
    task = progress.add_task("requests", total=plan.max_requests)
    counts = {"ok": 0, "failed": 0}

    def on_record(record: RequestRecord) -> None:
        counts["ok" if record.ok else "failed"] += 1
        progress.update(
            task,
            advance=1,
            description=f"{counts['ok']} completed, {counts['failed']} failed",
        )

    stop = asyncio.Event()
    with _stopped_by_signals(stop):
        result = await run_load(
            target, shape, plan, timeout=timeout, on_record=on_record, stop=stop
        )
    return target, result


@contextlib.contextmanager
def _stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) sets ``stop``: the run ends and keeps what was measured; the same
    signal again acts at once, as usual."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def received(number: signal.Signals) -> None:
        stop.set()
        loop.remove_signal_handler(number)

    for number in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(number, received, number)
    try:
        yield
    finally:
        for number in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(number)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_summary(summary: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The run as a person reads it."""
    load = metadata["load"]
    shape = f"{metadata['input_tokens']} in / {metadata['output_tokens']} out tokens"
    stdout.print(
        f"{metadata['model']} at {metadata['url']}{metadata['endpoint']}: "
        f"{load['pattern']} load, {shape}",
        markup=False,
    )
    overview = Table(show_header=False, box=None)
    overview.add_column(style="bold")
    overview.add_column(justify="right")
    overview.add_row(
        "requests",
        f"{summary['completed']} completed, {summary['failed']} failed, "
        f"{summary['incomplete']} cut off",
    )
    overview.add_row("duration", f"{summary['duration']:,.2f} s")
    overview.add_row("request throughput", f"{summary['request_throughput']:,.2f} req/s")
    if summary["request_goodput"] is not None:
        overview.add_row(
            "goodput (SLO met)",
            f"{summary['request_goodput']:,.2f} req/s",
        )
    overview.add_row("output throughput", f"{summary['output_throughput']:,.1f} tok/s")
    overview.add_row("total throughput", f"{summary['total_token_throughput']:,.1f} tok/s")
    stdout.print(overview)
    latencies = Table(title="latency (ms)")
    latencies.add_column("metric")
    for column in ("mean", "median", "p90", "p99"):
        latencies.add_column(column, justify="right")
    for key, label in METRIC_LABELS:
        latencies.add_row(
            label,
            *(_ms(summary.get(f"{stat}_{key}_ms")) for stat in ("mean", "median", "p90", "p99")),
        )
    stdout.print(latencies)
    for kind, count in summary["failure_reasons"].items():
        stderr.print(f"failed: {count} x {kind}", markup=False)


def run_command(
    url: str = typer.Option(
        DEFAULT_URL,
        "--url",
        help="The server's address (this machine by default; a remote one must be named here).",
    ),
    endpoint: str = typer.Option(
        "completions",
        "--endpoint",
        help="completions (/v1/completions) or chat (/v1/chat/completions).",
    ),
    model: str | None = typer.Option(
        None, "--model", help="Model name to request (default: the first the server lists)."
    ),
    pattern: str = typer.Option(
        "sync",
        "--pattern",
        help="sync (one at a time), concurrency (N clients), rate (constant), poisson (random "
        "arrivals at a mean rate).",
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Clients of --pattern concurrency."
    ),
    rate: float | None = typer.Option(
        None, "--rate", help="Requests per second of --pattern rate or poisson."
    ),
    requests: int = typer.Option(100, "--requests", help="Measured requests, at most."),
    max_seconds: float = typer.Option(
        600.0, "--max-seconds", help="Seconds the measured phase may last, at most."
    ),
    warmup: int = typer.Option(
        1, "--warmup", help="Requests sent first and left out of the results."
    ),
    ramp: float = typer.Option(
        1.0, "--ramp", help="Seconds over which --pattern concurrency starts its clients."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of --pattern poisson's arrivals."),
    input_tokens: int = typer.Option(128, "--input-tokens", help="Prompt length in tokens."),
    output_tokens: int = typer.Option(128, "--output-tokens", help="Output length in tokens."),
    ignore_eos: bool = typer.Option(
        True,
        "--ignore-eos/--allow-eos",
        help="Ask the server for exactly --output-tokens (ignore_eos, min_tokens); "
        "--allow-eos for servers that refuse those fields.",
    ),
    timeout: float = typer.Option(
        60.0, "--timeout", help="Seconds the server may stay silent before a request fails."
    ),
    slo_ttft: float | None = typer.Option(None, "--slo-ttft", help="Goodput target: TTFT (ms)."),
    slo_tpot: float | None = typer.Option(None, "--slo-tpot", help="Goodput target: TPOT (ms)."),
    slo_e2e: float | None = typer.Option(
        None, "--slo-e2e", help="Goodput target: end-to-end latency (ms)."
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token, if the server wants one."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Write the run to FILE.json (summary as vLLM names it, with planner's metadata) "
        "and its requests to FILE.jsonl.",
    ),
    json_output: bool = JSON_OPTION,
) -> None:
    """Measure an OpenAI-compatible server (vLLM, SGLang, TGI, TensorRT-LLM, NIM, llama.cpp,
    `planner bench serve`) under a load pattern: TTFT, TPOT, inter-token and end-to-end latency,
    throughput and goodput. Ctrl-C stops the run and keeps what was measured."""
    base_url = check_url(url)
    kind = cast(EndpointKind, _check_choice("--endpoint", endpoint, tuple(ENDPOINT_PATHS)))
    plan = load_plan(
        pattern,
        concurrency=concurrency,
        rate=rate,
        requests=requests,
        max_seconds=max_seconds,
        warmup=warmup,
        ramp=ramp,
        seed=seed,
    )
    shape = RequestShape(input_tokens, output_tokens, ignore_eos)
    slo = SloTargets(slo_ttft, slo_tpot, slo_e2e)
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout:g}: expected a positive number of seconds")
    if out is not None:
        check_output_path(out, "--out")
    if not is_loopback_url(base_url):
        stderr.print(f"note: measuring a remote server, {base_url}", markup=False)
    with _progress(plan.max_requests, show=True) as progress:
        target, result = asyncio.run(
            _measure(base_url, kind, model, api_key, shape, plan, timeout, progress)
        )
    summary = summarize(result.records, result.duration, slo)
    metadata = run_metadata(target, shape, plan, slo, timeout, result)
    started = result.started_at.strftime("%Y%m%d-%H%M%S")
    document = {**vllm_settings(target, plan, started), **summary}
    if result.stopped == "interrupted":
        stderr.print(
            f"interrupted: kept the {len(result.records)} requests measured so far", markup=False
        )
    elif result.stopped == "seconds":
        stderr.print(
            f"stopped at --max-seconds {plan.max_seconds:g} after {len(result.records)} requests",
            markup=False,
        )
    if out is not None:
        sidecar = write_run(out, document, metadata, result.records)
        metadata["requests_file"] = sidecar.name  # as the file says
        stderr.print(f"wrote {out} and {sidecar}", markup=False)
    if json_output:
        print_json({**document, "planner": metadata})
    else:
        print_summary(summary, metadata)
    if summary["completed"] == 0:
        reasons = ", ".join(f"{n} x {k}" for k, n in summary["failure_reasons"].items())
        raise PlannerError(
            f"no request completed ({reasons or 'none was sent'}); first error: "
            + next((r.error or "" for r in result.records if r.error), "-")
        )


def serve_command(
    host: str = typer.Option(
        DEFAULT_HOST,
        "--host",
        help="Address to listen on (loopback by default; anything else is reachable by others).",
    ),
    port: int = typer.Option(
        DEFAULT_PORT, "--port", min=0, max=65535, help="Port to listen on (0: any free one)."
    ),
    gpu: str = typer.Option("L4", "--gpu", help="GPU whose predicted timings the tokens follow."),
    model: str = typer.Option(
        "llama-3.1-8b", "--model", help="Catalog model: its shape and the name it is served as."
    ),
    precision: str = typer.Option("bf16", "--precision", help="Weight precision."),
    speed: float = typer.Option(
        1.0, "--speed", help="Run this many times faster than predicted (tests use 100 or more)."
    ),
    fail_every: int = typer.Option(
        0, "--fail-every", help="Testing clients: every Nth request answers HTTP 500."
    ),
    stall_every: int = typer.Option(
        0, "--stall-every", help="Testing clients: every Nth request stalls after one token."
    ),
    drop_every: int = typer.Option(
        0, "--drop-every", help="Testing clients: every Nth stream is cut off halfway."
    ),
    stall_seconds: float = typer.Option(
        3600.0, "--stall-seconds", help="How long a stalled request stays silent."
    ),
) -> None:
    """Serve an OpenAI-compatible streaming endpoint on this machine whose tokens arrive when
    planner's latency model predicts for a catalog deployment: a model-driven stand-in to test
    `planner bench run` and other clients against (it computes nothing). Ctrl-C stops it."""
    check_speed(speed)
    if not host.strip() or any(c.isspace() for c in host):
        raise UsageError(f"--host {shown(host)}: expected an address such as {DEFAULT_HOST}")
    if not is_loopback_host(host):
        stderr.print(
            f"warning: --host {host} is not a loopback address; anyone who can reach it can "
            "use this server",
            markup=False,
        )
    faults = Faults(fail_every, stall_every, drop_every, stall_seconds)
    engine = ModelEngine(gpu, model, precision, speed=speed)
    server = BenchServer(
        engine,
        model_name=engine.model_name,
        host=host,
        port=port,
        faults=faults,
        allow_remote=True,
    )

    async def serve() -> None:
        await server.start()
        stderr.print(
            f"serving {engine.description} at {server.url} (/v1/completions, "
            "/v1/chat/completions, /v1/models, /health); Ctrl-C stops",
            markup=False,
            soft_wrap=True,
        )
        stop = asyncio.Event()
        serving = asyncio.create_task(server.serve_forever())
        try:
            with _stopped_by_signals(stop):  # Ctrl-C or SIGTERM
                await stop.wait()
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            await server.close()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    stderr.print("stopped", markup=False)
