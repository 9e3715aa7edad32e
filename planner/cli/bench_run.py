"""``planner bench run`` (measure an OpenAI-compatible server under a load pattern, a sweep of
rates or a replayed trace) and ``planner bench serve`` (the model-driven stand-in server on this
machine): options parsed into a request for :func:`planner.usecases.bench_run.run_bench` (and
:func:`planner.bench.serve.serve`), and the run rendered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from planner.bench.harness import DEFAULT_SWEEP_CONCURRENCY, DEFAULT_SWEEP_POINTS
from planner.cli.context import print_json, sessions_from, stderr, stdout
from planner.cli.options import (
    BENCH_DEFAULT_HOST,
    BENCH_DEFAULT_PORT,
    BENCH_DEFAULT_URL,
    JSON_OPTION,
)
from planner.cli.tables import Column, print_table, print_whole
from planner.common.text import printable
from planner.errors import PlannerError

if TYPE_CHECKING:
    from rich.progress import Progress

    from planner.bench.metrics import RequestRecord


METRIC_LABELS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency"))


# --- measuring --------------------------------------------------------------------------------


@contextlib.contextmanager
def progress_bar(total: int, show: bool) -> Iterator[Progress]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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


class _Counter:
    """Progress of the stage running: completed, failed and short requests."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("requests", total=None)
        self.prefix = ""
        self.ok = self.failed = self.short = 0

    def stage(self, prefix: str, total: int) -> None:
        self.prefix, self.ok, self.failed, self.short = prefix, 0, 0, 0
        self.progress.reset(self.task, total=total, description=prefix or "requests")

    def record(self, record: RequestRecord) -> None:
        if record.ok:
            self.ok += 1
        elif record.status == "short":
            self.short += 1
        else:
            self.failed += 1
        short = f", {self.short} short" if self.short else ""
        self.progress.update(
            self.task,
            advance=1,
            description=f"{self.prefix}{self.ok} completed, {self.failed} failed{short}",
        )


def _note(text: str, *, soft_wrap: bool = False) -> None:
    stderr.print(text, markup=False, soft_wrap=soft_wrap)


class _Shown:
    """A run's progress as the CLI shows it: a bar on stderr while it measures, notes on
    stderr."""

    def __init__(self) -> None:
        self.counter: _Counter | None = None

    def note(self, text: str, *, soft_wrap: bool = False) -> None:
        _note(text, soft_wrap=soft_wrap)

    @contextlib.contextmanager
    def measuring(self, total: int) -> Iterator[None]:
        with progress_bar(total, show=True) as progress:
            self.counter = _Counter(progress)
            try:
                yield
            finally:
                self.counter = None

    def stage(self, prefix: str, total: int) -> None:
        if self.counter is not None:
            self.counter.stage(prefix, total)

    def record(self, record: RequestRecord) -> None:
        if self.counter is not None:
            self.counter.record(record)


# --- printing ---------------------------------------------------------------------------------


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_summary(summary: dict[str, Any], metadata: dict[str, Any]) -> None:
    """The run as a person reads it."""
    load = metadata["load"]
    replay = metadata.get("replay")
    if replay is not None:
        shape = (
            f"dataset {printable(replay['dataset'], 60)}, {replay['requests']} requests at "
            f"x{replay['speedup']:g} speed"
        )
    else:
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
        f"{summary['incomplete']} cut off"
        + (f", {summary['short']} short" if summary["short"] else ""),
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
    print_whole(overview)
    latencies = Table(title="latency (ms)")
    latencies.add_column("metric")
    for column in ("mean", "median", "p90", "p99"):
        latencies.add_column(column, justify="right")
    for key, label in METRIC_LABELS:
        latencies.add_row(
            label,
            *(_ms(summary.get(f"{stat}_{key}_ms")) for stat in ("mean", "median", "p90", "p99")),
        )
    print_whole(latencies)
    for kind, count in summary["failure_reasons"].items():
        stderr.print(f"failed: {count} x {kind}", markup=False)


def print_stream_notes(summaries: list[dict[str, Any]]) -> None:
    """What the responses of a run (every stage of a sweep) held that a person should know,
    on stderr whatever the output: short responses, and events that were not UTF-8."""
    total = {
        key: sum(s[key] for s in summaries)
        for key in (
            "short",
            "short_output_tokens",
            "short_requested_output_tokens",
            "invalid_utf8_events",
            "invalid_utf8_requests",
        )
    }
    if total["short"]:
        stderr.print(
            f"short: {total['short']} responses finished early, "
            f"{total['short_output_tokens']:,} tokens of the "
            f"{total['short_requested_output_tokens']:,} asked for with ignore_eos; left out of "
            "the completed requests and their latencies (TPOT, calibration rows). Does the "
            "server honour ignore_eos? --allow-eos counts such responses completed",
            markup=False,
        )
    if total["invalid_utf8_events"]:
        stderr.print(
            f"note: {total['invalid_utf8_events']} events in {total['invalid_utf8_requests']} "
            "responses were not valid UTF-8 (read with U+FFFD in place of the bad bytes)",
            markup=False,
        )


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_sweep(document: dict[str, Any]) -> None:
    """A sweep as a person reads it: one row per stage."""
    metadata, runs = document["planner"], document["runs"]
    stdout.print(
        f"{metadata['model']} at {metadata['url']}{metadata['endpoint']}: sweep of "
        f"{len(runs)} stages, {metadata['input_tokens']} in / {metadata['output_tokens']} out "
        "tokens",
        markup=False,
    )
    loads = [str(r["planner"]["label"]) for r in runs]
    columns = [
        Column("stage", [str(i + 1) for i in range(len(runs))]),
        Column("load", loads),
        Column(
            "completed",
            [
                f"{r['completed']}"
                + (
                    f" ({r['failed'] + r['incomplete'] + r['short']} not)"
                    if r["failed"] + r["incomplete"] + r["short"]
                    else ""
                )
                for r in runs
            ],
            justify="right",
        ),
        Column("TTFT ms", [_number(r["mean_ttft_ms"], 1) for r in runs], justify="right"),
        Column("p99 TTFT", [_number(r["p99_ttft_ms"], 1) for r in runs], drop=2, justify="right"),
        Column("TPOT ms", [_number(r["mean_tpot_ms"], 2) for r in runs], justify="right"),
        Column("E2E ms", [_number(r["mean_e2el_ms"], 1) for r in runs], drop=1, justify="right"),
        Column("req/s", [_number(r["request_throughput"], 2) for r in runs], justify="right"),
        Column(
            "tok/s", [_number(r["output_throughput"], 1) for r in runs], drop=3, justify="right"
        ),
    ]
    if metadata["slo_ms"]:
        columns.append(
            Column("goodput", [_number(r["request_goodput"], 2) for r in runs], justify="right")
        )
    print_table(
        columns, title="Sweep: mean latencies (ms), throughputs (requests/s, output tokens/s)"
    )


def run_command(
    ctx: typer.Context,
    url: str = typer.Option(
        BENCH_DEFAULT_URL,
        "--url",
        help="The server's address (this machine by default; a remote one must be named here).",
    ),
    endpoint: str = typer.Option(
        "completions",
        "--endpoint",
        help="completions (/v1/completions) or chat (/v1/chat/completions).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model name to request (default: the first the server lists); also the model of "
        "--out-csv's rows, unless --catalog-model names it.",
    ),
    pattern: str = typer.Option(
        "sync",
        "--pattern",
        help="sync (one at a time), concurrency (N clients), rate (constant), poisson (random "
        "arrivals at a mean rate), sweep (a synchronous, a throughput and rate stages between "
        "them), replay (an ingested dataset's requests at their logged times and lengths).",
    ),
    concurrency: int | None = typer.Option(
        None,
        "--concurrency",
        help="Clients of --pattern concurrency, and of --pattern sweep's throughput stage "
        f"(default {DEFAULT_SWEEP_CONCURRENCY}).",
    ),
    rate: float | None = typer.Option(
        None, "--rate", help="Requests per second of --pattern rate or poisson."
    ),
    requests: int = typer.Option(
        100,
        "--requests",
        help="Measured requests, at most (per stage of a sweep; a replay sends the first N of "
        "its window).",
    ),
    max_seconds: float = typer.Option(
        600.0,
        "--max-seconds",
        help="Seconds a run may last, warm-up included (per stage of a sweep): a hard wall; "
        "requests still in flight then are cut off, however much they are still receiving.",
    ),
    warmup: int = typer.Option(
        1,
        "--warmup",
        help="Requests sent first and left out of the results (before each stage of a sweep).",
    ),
    ramp: float = typer.Option(
        1.0,
        "--ramp",
        help="Seconds over which --pattern concurrency (and a sweep's throughput stage) starts "
        "its clients.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of Poisson arrivals."),
    sweep_points: int | None = typer.Option(
        None,
        "--sweep-points",
        help=f"Stages of --pattern sweep in all, the synchronous and throughput ones included "
        f"(default {DEFAULT_SWEEP_POINTS}).",
    ),
    sweep_kind: str | None = typer.Option(
        None,
        "--sweep-kind",
        help="How --pattern sweep's rate stages send: rate (constant, the default) or poisson.",
    ),
    dataset: str | None = typer.Option(
        None,
        "--dataset",
        help="--pattern replay: the ingested dataset to replay (from the store of planner's "
        "--db, else $PLANNER_DATABASE_URL).",
    ),
    dataset_model: str | None = typer.Option(
        None,
        "--dataset-model",
        help="--pattern replay: only the dataset's requests logged for this model.",
    ),
    start: str | None = typer.Option(
        None, "--start", help="--pattern replay: from this time of the log (ISO 8601)."
    ),
    end: str | None = typer.Option(
        None, "--end", help="--pattern replay: until this time of the log (ISO 8601)."
    ),
    speedup: float | None = typer.Option(
        None,
        "--speedup",
        help="--pattern replay: divide the log's gaps between arrivals by this (default 1).",
    ),
    input_tokens: int = typer.Option(
        128, "--input-tokens", help="Prompt length in tokens (a replay keeps the log's)."
    ),
    output_tokens: int = typer.Option(
        128, "--output-tokens", help="Output length in tokens (a replay keeps the log's)."
    ),
    ignore_eos: bool = typer.Option(
        True,
        "--ignore-eos/--allow-eos",
        help="Ask the server for exactly the output length (ignore_eos, min_tokens); "
        "--allow-eos for servers that refuse those fields.",
    ),
    timeout: float = typer.Option(
        60.0,
        "--timeout",
        help="Seconds one request may take in all, connecting to the last byte, before it "
        "fails (silences included). A response is also refused past 1 MiB on one line or in "
        "one event, or 64 MiB in all (4 KiB per requested token when more).",
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
        help="Write the run to FILE.json (summary as vLLM names it, with planner's metadata; "
        'a sweep: {"planner": ..., "runs": [one per stage]}) and its requests to FILE.jsonl '
        "(a sweep's tagged with their stage).",
    ),
    store: bool = typer.Option(
        True,
        "--store/--no-store",
        help="Keep the run (a sweep: every stage) and its requests in planner's store "
        "(`planner bench runs list`, the dashboard's Benchmarks page).",
    ),
    run_name: str | None = typer.Option(
        None,
        "--name",
        help="The stored run's name (a sweep's stages: NAME-1, NAME-2, ...); checked before "
        "anything is sent. Default: run-<id> (sweep-<time> for a sweep).",
    ),
    out_csv: Path | None = typer.Option(
        None,
        "--out-csv",
        metavar="FILE",
        help="Also write the run (every stage of a sweep) as measurement rows for `planner "
        "calibrate`; needs --gpu, --precision and --engine. Not for --pattern replay (mixed "
        "lengths are not a calibration point).",
    ),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU measured, a catalog name (`planner catalog gpus`); recorded."
    ),
    catalog_model: str | None = typer.Option(
        None,
        "--catalog-model",
        help="Catalog model that was served, where the server's name for it is not a catalog "
        "name or alias; recorded.",
    ),
    precision: str | None = typer.Option(
        None, "--precision", help="Weight precision served: bf16, fp8, ...; recorded."
    ),
    engine: str | None = typer.Option(
        None, "--engine", help="Engine serving: vllm, sglang, trtllm; recorded."
    ),
    tp: int | None = typer.Option(
        None,
        "--tp",
        "--num-gpus",
        help="Tensor-parallel GPUs per server instance (default 1); recorded.",
    ),
    json_output: bool = JSON_OPTION,
) -> None:
    """Measure an OpenAI-compatible server (vLLM, SGLang, TGI, TensorRT-LLM, NIM, llama.cpp,
    `planner bench serve`) under a load pattern, a sweep of rates or a replayed trace: TTFT,
    TPOT, inter-token and end-to-end latency, throughput and goodput, optionally written as
    calibration rows. Ctrl-C stops the run and keeps what was measured. With --ignore-eos, a
    response shorter than asked is counted short, not completed."""
    # the harness is loaded by the command that runs it, not by every `planner` start
    from planner.bench.harness import Deployment
    from planner.usecases.bench_run import BenchRunRequest, ReplayWindow, run_bench

    request = BenchRunRequest(
        url=url,
        endpoint=endpoint,
        model=model,
        pattern=pattern,
        concurrency=concurrency,
        rate=rate,
        requests=requests,
        max_seconds=max_seconds,
        warmup=warmup,
        ramp=ramp,
        seed=seed,
        sweep_points=sweep_points,
        sweep_kind=sweep_kind,
        replay=ReplayWindow(dataset, dataset_model, start, end, speedup),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        ignore_eos=ignore_eos,
        timeout=timeout,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        slo_e2e=slo_e2e,
        api_key=api_key,
        out=out,
        store=store,
        name=run_name,
        out_csv=out_csv,
        deployment=Deployment(gpu, catalog_model, precision, engine, tp),
    )
    with sessions_from(ctx) as sessions:
        result = run_bench(request, sessions, progress=_Shown())
    if json_output:
        print_json(result.document)
    elif result.sweep:
        print_sweep(result.document)
    else:
        print_summary(result.summaries[0], result.document["planner"])
    print_stream_notes(result.summaries)
    if result.failure is not None:
        raise PlannerError(result.failure)


def serve_command(
    host: str = typer.Option(
        BENCH_DEFAULT_HOST,
        "--host",
        help="Address to listen on (loopback by default; anything else is reachable by others).",
    ),
    port: int = typer.Option(
        BENCH_DEFAULT_PORT, "--port", min=0, max=65535, help="Port to listen on (0: any free one)."
    ),
    backend: str = typer.Option(
        "model",
        "--backend",
        help="model: tokens timed by planner's latency model (computes nothing); torch: the "
        "in-process PyTorch engine computes every token (needs planner[bench]).",
    ),
    gpu: str = typer.Option(
        "L4", "--gpu", help="--backend model: GPU whose predicted timings the tokens follow."
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Catalog model: its shape and the name it is served as (default: llama-3.1-8b "
        "for --backend model, bench-llama-tiny for --backend torch).",
    ),
    precision: str | None = typer.Option(
        None, "--precision", help="Weight precision (default: bf16 for model, fp32 for torch)."
    ),
    speed: float = typer.Option(
        1.0,
        "--speed",
        help="--backend model: run this many times faster than predicted (tests use 100+).",
    ),
    device: str = typer.Option("cpu", "--device", help="--backend torch: cpu or cuda."),
    threads: int = typer.Option(
        1, "--threads", help="--backend torch: CPU threads (1: steadiest on a shared machine)."
    ),
    max_seqs: int = typer.Option(
        8, "--max-seqs", help="--backend torch: sequences decoded together (KV-cache slots)."
    ),
    max_len: int | None = typer.Option(
        None,
        "--max-len",
        help="--backend torch: prompt + output tokens per sequence (default: the model's "
        "context); the KV cache holds --max-seqs x this many tokens.",
    ),
    seed: int = typer.Option(0, "--seed", help="--backend torch: seed of the random weights."),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="--backend torch: a local Hugging Face Llama-layout checkpoint folder "
        "(config.json, *.safetensors) to load instead of random weights; --model, if given, "
        "names the catalog model it is.",
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
    read_timeout: float = typer.Option(
        10.0,
        "--read-timeout",
        help="Seconds a request's head and body may take to arrive, from its first byte (and a "
        "new connection's first byte); a slower one is answered 408 and closed.",
    ),
    idle_timeout: float = typer.Option(
        60.0,
        "--idle-timeout",
        help="Seconds a kept-alive connection may wait for its next request.",
    ),
    max_connections: int | None = typer.Option(
        None,
        "--max-connections",
        help="Connections served at once; one more is answered 503 (default: the open-file "
        "limit less 64).",
    ),
) -> None:
    """Serve an OpenAI-compatible streaming endpoint on this machine: with --backend torch, a
    real transformer (random weights, a catalog model's shape) computes every token with
    continuous batching; with --backend model, tokens arrive when planner's latency model
    predicts for a catalog deployment (a stand-in that computes nothing). Ctrl-C stops it."""
    from planner.bench.serve import ServeRequest, serve

    request = ServeRequest(
        host=host,
        port=port,
        backend=backend,
        gpu=gpu,
        model=model,
        precision=precision,
        speed=speed,
        device=device,
        threads=threads,
        max_seqs=max_seqs,
        max_len=max_len,
        seed=seed,
        checkpoint=checkpoint,
        fail_every=fail_every,
        stall_every=stall_every,
        drop_every=drop_every,
        stall_seconds=stall_seconds,
        read_timeout=read_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
    )
    serve(request, _note)
