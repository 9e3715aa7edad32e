"""``planner bench run`` (measure an OpenAI-compatible server under a load pattern, a sweep of
rates or a replayed trace) and ``planner bench serve`` (the model-driven stand-in server on this
machine)."""

from __future__ import annotations

import contextlib
import json
import math
import platform
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer
from rich.table import Table

import planner
from planner.cli.bench_store import store_runs, stored_names
from planner.cli.context import print_json, stderr, stdout
from planner.cli.latency import store_session
from planner.cli.options import (
    BENCH_DEFAULT_HOST,
    BENCH_DEFAULT_PORT,
    BENCH_DEFAULT_URL,
    BENCH_PATTERNS,
    JSON_OPTION,
)
from planner.cli.tables import Column, print_table
from planner.common.files import atomic_output, check_output_path
from planner.common.text import printable, shown
from planner.errors import PlannerError, UsageError

if TYPE_CHECKING:
    import asyncio

    from rich.progress import Progress

    from planner.bench.client import EndpointKind, RequestShape, Target
    from planner.bench.engine import TorchServingEngine
    from planner.bench.loadgen import LoadPlan, RunResult, StageKind, SweepPlan, SweepResult
    from planner.bench.metrics import RequestRecord, SloTargets
    from planner.bench.replay import Trace
    from planner.bench.results import BenchRun, Load, RunInfo, Stats
    from planner.bench.server import ModelEngine


METRIC_LABELS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E latency"))
CLI_PATTERNS = (*BENCH_PATTERNS, "sweep")
DEFAULT_SWEEP_CONCURRENCY = 16
DEFAULT_SWEEP_POINTS = 8
TOOL = "planner bench run"
SERVE_BACKENDS = ("model", "torch")
T = TypeVar("T")


def check_choice(option: str, value: str, choices: tuple[str, ...]) -> str:
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
    trace: Trace | None = None,
) -> LoadPlan:
    """The options of a load pattern, checked together (a rate without a rate pattern is a
    mistake, not something to ignore). ``replay`` sends ``trace``'s requests."""
    from planner.bench.loadgen import PATTERNS, LoadPlan, Pattern

    name = cast(Pattern, check_choice("--pattern", pattern, PATTERNS))
    if name == "concurrency" and concurrency is None:
        raise UsageError("--pattern concurrency needs --concurrency N (clients)")
    if name != "concurrency" and concurrency is not None:
        why = {
            "sync": "sends one request at a time",
            "replay": "sends at the log's times",
        }.get(name, "sets a rate instead")
        raise UsageError(
            f"--concurrency goes with --pattern concurrency or sweep (--pattern {name} {why})"
        )
    if name in ("rate", "poisson") and rate is None:
        raise UsageError(f"--pattern {name} needs --rate (requests per second)")
    if name not in ("rate", "poisson") and rate is not None:
        raise UsageError(f"--rate goes with --pattern rate or poisson, not {name}")
    if name == "replay":
        if trace is None:
            raise UsageError("--pattern replay needs --dataset NAME (an ingested dataset)")
        kept = trace.requests[:requests]
        return LoadPlan(
            pattern=name,
            max_requests=len(kept),
            max_seconds=max_seconds,
            warmup=warmup,
            schedule=tuple(r.offset_s for r in kept),
            lengths=tuple((r.input_tokens, r.output_tokens) for r in kept),
        )
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


def sweep_plan(
    *,
    concurrency: int | None,
    rate: float | None,
    requests: int,
    max_seconds: float,
    warmup: int,
    ramp: float,
    seed: int,
    points: int | None,
    kind: str | None,
) -> SweepPlan:
    """The options of ``--pattern sweep``: each stage bounded by ``--requests`` and
    ``--max-seconds``; ``--concurrency`` clients in the throughput stage."""
    from planner.bench.loadgen import SWEEP_KINDS, SweepKind, SweepPlan

    if rate is not None:
        raise UsageError(
            "--rate goes with --pattern rate or poisson; --pattern sweep measures its rates "
            "(between the synchronous and the throughput stage)"
        )
    return SweepPlan(
        points=DEFAULT_SWEEP_POINTS if points is None else points,
        max_concurrency=DEFAULT_SWEEP_CONCURRENCY if concurrency is None else concurrency,
        max_requests=requests,
        max_seconds=max_seconds,
        kind=cast(SweepKind, check_choice("--sweep-kind", kind or "rate", SWEEP_KINDS)),
        warmup=warmup,
        seed=seed,
        ramp_s=ramp,
    )


def _only_with(pattern: str, wanted: str, given: dict[str, object | None]) -> None:
    """Options that only ``--pattern wanted`` reads must not be given to another pattern."""
    if pattern == wanted:
        return
    for option, value in given.items():
        if value is not None:
            raise UsageError(f"{option} goes with --pattern {wanted}, not {pattern}")


# --- what a run records ---------------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """What was measured, as ``--gpu``, ``--catalog-model``, ``--precision``, ``--engine`` and
    ``--tp`` name it: recorded in the metadata, and the names of ``--out-csv``'s rows."""

    gpu: str | None = None
    model: str | None = None  # None: the served model's name
    precision: str | None = None
    engine: str | None = None
    tp: int | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.gpu, self.model, self.precision, self.engine))

    def to_dict(self, served: str) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "model": self.model or served,
            "precision": self.precision,
            "engine": self.engine,
            "tp": self.tp or 1,
        }

    def check_for_rows(self) -> None:
        """``--out-csv`` needs every name calibration keys its rows by."""
        for option, value, what in (
            ("--gpu", self.gpu, "the GPU measured (`planner catalog gpus`)"),
            ("--precision", self.precision, "the weight precision served: bf16, fp8, ..."),
            ("--engine", self.engine, "the engine serving: vllm, sglang, trtllm"),
        ):
            if value is None or not value.strip():
                raise UsageError(f"--out-csv needs {option}: {what}")


def run_info(
    target: Target,
    deployment: Deployment,
    load: Load,
    *,
    source: str,
    index: int,
    label: str,
    started: str | None,
) -> RunInfo:
    """The ``planner`` block of a :class:`BenchRun` measured by ``bench run``."""
    from planner.bench.results import RunInfo

    return RunInfo(
        tool=TOOL,
        tool_version=planner.__version__,
        source_file=source,
        source_format=TOOL,
        benchmark=index,
        load=load,
        gpu=deployment.gpu,
        gpu_count=deployment.tp or 1,
        engine=deployment.engine,
        model=deployment.model or target.model,
        precision=deployment.precision,
        tp=deployment.tp or 1,
        label=label,
        date=started,
    )


def calibration_load(plan: LoadPlan) -> Load:
    """The load a plan offers, in calibration's terms (a replay's is its mean arrival rate)."""
    from planner.bench.results import Load

    if plan.pattern in ("sync", "concurrency"):
        return Load("concurrency", float(plan.clients))
    if plan.pattern == "replay":
        arrivals = plan.arrivals()
        span = arrivals[-1] if arrivals else 0.0
        return Load("qps", (len(arrivals) - 1) / span if span > 0 else None, "trace")
    return Load("qps", plan.rate, "constant" if plan.pattern == "rate" else "poisson")


def bench_run_of(summary: dict[str, Any], info: RunInfo) -> BenchRun:
    """A measured run's summary (:func:`~planner.bench.metrics.summarize`) as a
    :class:`BenchRun`, the form calibration rows and imported runs take."""
    from planner.bench.results import BenchRun, Stats

    def stats(latency: str) -> Stats:
        return Stats(
            **{
                s: summary[f"{s}_{latency}_ms"]
                for s in ("mean", "median", "std", "p50", "p90", "p99")
            }
        )

    completed = int(summary["completed"])
    return BenchRun(
        ttft=stats("ttft"),
        tpot=stats("tpot"),
        itl=stats("itl"),
        e2el=stats("e2el"),
        completed=completed,
        failed=int(summary["failed"]),
        duration=float(summary["duration"]),
        request_throughput=summary["request_throughput"],
        output_throughput=summary["output_throughput"],
        total_token_throughput=summary["total_token_throughput"],
        total_input_tokens=summary["total_input_tokens"],
        total_output_tokens=summary["total_output_tokens"],
        input_len=summary["total_input_tokens"] / completed if completed else None,
        output_len=summary["total_output_tokens"] / completed if completed else None,
        info=info,
    )


def check_calibration_names(info: RunInfo, shape: RequestShape, named_model: bool) -> None:
    """Check, before the first request, that ``--out-csv``'s rows will have catalog names and
    a deployment the catalog can run: the checks :func:`measurement_rows` makes, on a run of
    the lengths to be measured."""
    from planner.bench.results import BenchRun, Stats, measurement_rows

    probe = BenchRun(
        ttft=Stats(),
        tpot=Stats(),
        itl=Stats(),
        e2el=Stats(),
        completed=1,
        failed=0,
        duration=1.0,
        request_throughput=None,
        output_throughput=None,
        total_token_throughput=None,
        total_input_tokens=None,
        total_output_tokens=None,
        input_len=float(shape.input_tokens),
        output_len=float(shape.output_tokens),
        info=info,
    )
    try:
        measurement_rows([probe])
    except UsageError as exc:
        hint = (
            "; in bench run, --catalog-model names the catalog model when the server's name "
            "for it is not one"
            if "--model" in str(exc) and not named_model
            else ""
        )
        raise UsageError(f"--out-csv: {exc}{hint}") from None


def write_calibration_rows(runs: list[tuple[BenchRun, RunResult]], out_csv: Path) -> None:
    """``--out-csv``: the runs' measurement rows, leaving out runs stopped by Ctrl-C (their
    throughputs count a cut-off end)."""
    from planner.bench.results import measurement_rows, write_measurements

    kept = [run for run, result in runs if result.stopped != "interrupted"]
    if len(kept) < len(runs):
        stderr.print(
            f"note: --out-csv leaves out {len(runs) - len(kept)} interrupted run(s)", markup=False
        )
    rows = measurement_rows(kept)
    if not rows:
        stderr.print(
            f"note: no measurement rows to write to {printable(str(out_csv))} "
            "(no run completed a request)",
            markup=False,
        )
        return
    write_measurements(rows, out_csv)
    engine = kept[0].info.engine
    stderr.print(
        f"wrote {len(rows)} measurement rows to {printable(str(out_csv))}; fit them with "
        f"`planner calibrate {printable(str(out_csv))} --name NAME --engine {engine}`",
        markup=False,
        soft_wrap=True,
    )


def vllm_settings(target: Target, plan: LoadPlan, started: str) -> dict[str, Any]:
    """The run settings ``vllm bench serve --save-result`` writes at the top of its JSON (a
    replay's request rate is its trace's mean)."""
    open_loop = plan.pattern in ("rate", "poisson", "replay")
    rate: float | str | None = plan.rate
    if plan.pattern == "replay":
        rate = calibration_load(plan).value or "inf"
    return {
        "date": started,
        "backend": "openai-chat" if target.endpoint == "chat" else "openai",
        "endpoint_type": "openai-chat" if target.endpoint == "chat" else "openai",
        "model_id": target.model,
        "num_prompts": plan.max_requests,
        "request_rate": rate if open_loop else "inf",
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
    import httpx

    from planner.bench.client import ENDPOINT_PATHS

    warmup = result.warmup_records
    replay = plan.pattern == "replay"  # its lengths are its requests' own
    return {
        "tool": TOOL,
        "planner_version": planner.__version__,
        "httpx_version": httpx.__version__,
        "python_version": platform.python_version(),
        "started_at": result.started_at.isoformat(),
        "url": target.shown_base_url,
        "endpoint": ENDPOINT_PATHS[target.endpoint],
        "model": target.model,
        "load": plan.describe(),
        "input_tokens": None if replay else shape.input_tokens,
        "output_tokens": None if replay else shape.output_tokens,
        "ignore_eos": shape.exact_output,
        "timeout_s": timeout,
        "limits": stream_limits(shape),
        "slo_ms": slo.to_dict(),
        "stopped": result.stopped,
        "warmup_completed": sum(1 for r in warmup if r.ok),
        "warmup_failed": sum(1 for r in warmup if not r.ok),
    }


def stream_limits(shape: RequestShape) -> dict[str, int]:
    """The sizes past which a response is refused as ``bad_stream`` (a replay's requests each
    have their own response limit: the one here is for the run's output length)."""
    from planner.bench.sse import (
        MAX_EVENT_BYTES,
        MAX_LINE_BYTES,
        response_limit,
        token_chunk_limit,
    )

    return {
        "line_bytes": MAX_LINE_BYTES,
        "event_bytes": MAX_EVENT_BYTES,
        "response_bytes": response_limit(shape.output_tokens),
        "text_chunks": token_chunk_limit(shape.output_tokens),
    }


def _stage_label(kind: StageKind, plan: LoadPlan) -> str:
    if kind == "synchronous":
        return "synchronous"
    if kind == "throughput":
        return f"throughput, {plan.clients} clients"
    return f"{plan.pattern} {plan.rate:.3g} req/s"


def sweep_document(
    target: Target,
    shape: RequestShape,
    sweep: SweepPlan,
    slo: SloTargets,
    timeout: float,
    measured: SweepResult,
    runs: list[BenchRun],
) -> dict[str, Any]:
    """A sweep as its file holds it: the sweep's metadata under ``planner``, and under ``runs``
    every stage as a run (vLLM's summary keys, :class:`BenchRun`'s ``planner`` block with the
    stage's plan added: :meth:`BenchRun.from_dict` reads each back)."""
    import httpx

    from planner.bench.client import ENDPOINT_PATHS
    from planner.bench.metrics import summarize

    entries = []
    for index, (stage, run) in enumerate(zip(measured.stages, runs, strict=True)):
        result = stage.result
        summary = summarize(result.records, result.duration, slo)
        started = result.started_at.strftime("%Y%m%d-%H%M%S")
        entry = {**vllm_settings(target, stage.plan, started), **summary, **run.to_dict()}
        entry["planner"]["stage"] = {
            "index": index,
            "kind": stage.kind,
            "load": stage.plan.describe(),
            "stopped": result.stopped,
            "started_at": result.started_at.isoformat(),
            "warmup_completed": sum(1 for r in result.warmup_records if r.ok),
            "warmup_failed": sum(1 for r in result.warmup_records if not r.ok),
        }
        entries.append(entry)
    first = measured.stages[0].result.started_at.isoformat() if measured.stages else None
    metadata = {
        "tool": TOOL,
        "planner_version": planner.__version__,
        "httpx_version": httpx.__version__,
        "python_version": platform.python_version(),
        "started_at": first,
        "url": target.shown_base_url,
        "endpoint": ENDPOINT_PATHS[target.endpoint],
        "model": target.model,
        "load": sweep.describe(),
        "input_tokens": shape.input_tokens,
        "output_tokens": shape.output_tokens,
        "ignore_eos": shape.exact_output,
        "timeout_s": timeout,
        "limits": stream_limits(shape),
        "slo_ms": slo.to_dict(),
        "stopped": measured.stopped,
        "note": measured.note,
        "floor_request_rate": measured.floor,
        "ceiling_request_rate": measured.ceiling,
        "rates": measured.rates,
        "stages": len(measured.stages),
    }
    return {"planner": metadata, "runs": entries}


def write_sweep(path: Path, document: dict[str, Any], stages: SweepResult) -> Path:
    """The sweep's JSON, and beside it its requests, one JSON object a line, each tagged with
    its stage (``"stage": 0`` is the synchronous run); each file written whole."""
    from planner.bench.metrics import requests_path

    sidecar = requests_path(path)
    with atomic_output(sidecar, "--out") as temp, temp.open("w", encoding="utf-8") as out:
        for index, stage in enumerate(stages.stages):
            for record in stage.result.records:
                line = {**record.to_dict(), "stage": index}
                out.write(json.dumps(line, allow_nan=False) + "\n")
    document["planner"]["requests_file"] = sidecar.name
    with atomic_output(path, "--out") as temp:
        temp.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return sidecar


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


async def _measure(
    base_url: str,
    endpoint: EndpointKind,
    model: str | None,
    api_key: str | None,
    timeout: float,
    work: Callable[[Target, asyncio.Event], Awaitable[T]],
    before: Callable[[Target], None] | None = None,
) -> tuple[Target, T]:
    """Find the model to request (the first the server lists, unless named), run ``before``
    (checks that need it), then ``work``, which Ctrl-C stops through the event it is given."""
    import asyncio

    import httpx

    from planner.bench.client import Target, is_loopback_url, list_models

    if model is None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(
            timeout=timeout, headers=headers, trust_env=not is_loopback_url(base_url)
        ) as client:
            model = (await list_models(client, base_url, timeout))[0]
    target = Target(base_url, endpoint, model, api_key)
    if before is not None:
        before(target)
    stop = asyncio.Event()
    with _stopped_by_signals(stop):
        result = await work(target, stop)
    return target, result


@contextlib.contextmanager
def _stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) sets ``stop``: the run ends and keeps what was measured; the same
    signal again acts at once, as usual."""
    import asyncio

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
    import asyncio

    from planner.bench.client import (
        ENDPOINT_PATHS,
        EndpointKind,
        RequestShape,
        check_url,
        is_loopback_url,
    )
    from planner.bench.loadgen import LoadPlan, SweepPlan, run_load
    from planner.bench.metrics import SloTargets, summarize, write_run
    from planner.common.secrets import redact_url
    from planner.store.bench_runs import check_free_name

    base_url = check_url(url)
    kind = cast(EndpointKind, check_choice("--endpoint", endpoint, tuple(ENDPOINT_PATHS)))
    name = check_choice("--pattern", pattern, CLI_PATTERNS)
    _only_with(name, "sweep", {"--sweep-points": sweep_points, "--sweep-kind": sweep_kind})
    _only_with(
        name,
        "replay",
        {
            "--dataset": dataset,
            "--dataset-model": dataset_model,
            "--start": start,
            "--end": end,
            "--speedup": speedup,
        },
    )
    shape = RequestShape(input_tokens, output_tokens, ignore_eos)
    slo = SloTargets(slo_ttft, slo_tpot, slo_e2e)
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"--timeout {timeout:g}: expected a positive number of seconds")
    deployment = Deployment(gpu, catalog_model, precision, engine, tp)
    if tp is not None and tp < 1:
        raise UsageError(f"--tp {tp}: expected 1 or more GPUs")
    rows_to = out_csv if name != "replay" else None
    if out_csv is not None:
        check_output_path(out_csv, "--out-csv")
        if name == "replay":
            stderr.print(
                "note: --out-csv is skipped for --pattern replay: a trace's mixed lengths "
                "are not a calibration point (measure one shape, or a sweep, for those)",
                markup=False,
            )
        else:
            deployment.check_for_rows()
    if out is not None:
        from planner.bench.metrics import requests_path

        check_output_path(out, "--out")
        check_output_path(requests_path(out), "--out")  # the per-request file beside it
    sweep: SweepPlan | None = None
    trace: Trace | None = None
    run_plan: LoadPlan | None = None
    if name == "sweep":
        sweep = sweep_plan(
            concurrency=concurrency,
            rate=rate,
            requests=requests,
            max_seconds=max_seconds,
            warmup=warmup,
            ramp=ramp,
            seed=seed,
            points=sweep_points,
            kind=sweep_kind,
        )
    else:
        if name == "replay":
            trace = _read_trace(ctx, dataset, dataset_model, start, end, speedup, requests)
        run_plan = load_plan(
            name,
            concurrency=concurrency,
            rate=rate,
            requests=requests,
            max_seconds=max_seconds,
            warmup=warmup,
            ramp=ramp,
            seed=seed,
            trace=trace,
        )
    if store and run_name is not None:
        with store_session(ctx) as session:
            stages = sweep.points if sweep is not None else 0
            for stage_name in stored_names(run_name, stages):
                check_free_name(session, stage_name)
    if not is_loopback_url(base_url):
        stderr.print(f"note: measuring a remote server, {redact_url(base_url)}", markup=False)
    source = str(out) if out is not None else ""

    def check_names(target: Target) -> None:
        if rows_to is None:
            return
        first = run_plan or cast(SweepPlan, sweep).synchronous()
        info = run_info(
            target,
            deployment,
            calibration_load(first),
            source=source or target.shown_url,
            index=0,
            label="",
            started=None,
        )
        check_calibration_names(info, shape, named_model=catalog_model is not None)

    if sweep is not None:
        _sweep(
            base_url, kind, model, api_key, shape, sweep, slo, timeout, deployment,
            check_names, out, rows_to, json_output, (ctx, run_name) if store else None,
        )  # fmt: skip
        return
    plan = cast(LoadPlan, run_plan)
    with progress_bar(plan.max_requests, show=True) as progress:
        counter = _Counter(progress)
        counter.stage("", plan.max_requests)

        async def work(target: Target, stop: asyncio.Event) -> RunResult:
            return await run_load(
                target, shape, plan, timeout=timeout, on_record=counter.record, stop=stop
            )

        target, result = asyncio.run(
            _measure(base_url, kind, model, api_key, timeout, work, check_names)
        )
    summary = summarize(result.records, result.duration, slo)
    metadata = run_metadata(target, shape, plan, slo, timeout, result)
    if trace is not None:
        metadata["replay"] = trace.describe()
    if deployment.given or tp is not None:
        metadata["deployment"] = deployment.to_dict(target.model)
    started = result.started_at.strftime("%Y%m%d-%H%M%S")
    document = {**vllm_settings(target, plan, started), **summary}
    if result.stopped == "interrupted":
        stderr.print(
            f"interrupted: kept the {len(result.records)} requests measured so far", markup=False
        )
    elif result.stopped == "seconds":
        stderr.print(
            f"stopped at --max-seconds {plan.max_seconds:g} after {len(result.records)} requests"
            + (
                " (the warm-up reached it: no request was measured)"
                if not result.records and result.warmup_records
                else ""
            ),
            markup=False,
        )
    if out is not None:
        sidecar = write_run(out, document, metadata, result.records)
        metadata["requests_file"] = sidecar.name  # as the file says
        stderr.print(f"wrote {out} and {sidecar}", markup=False)
    info = run_info(
        target,
        deployment,
        calibration_load(plan),
        source=source or target.shown_url,
        index=0,
        label=plan.pattern,
        started=result.started_at.isoformat(),
    )
    measured_run = bench_run_of(summary, info)
    if rows_to is not None:
        write_calibration_rows([(measured_run, result)], rows_to)
    if store:
        store_runs(
            ctx,
            [(measured_run, result.records, metadata)],
            run_name,
            group=None,
            target=target.shown_url,
        )
    if json_output:
        print_json({**document, "planner": metadata})
    else:
        print_summary(summary, metadata)
    print_stream_notes([summary])
    if summary["completed"] == 0:
        reasons = ", ".join(
            [f"{n} x {k}" for k, n in summary["failure_reasons"].items()]
            + ([f"{summary['short']} x short"] if summary["short"] else [])
        )
        if not result.records and result.warmup_records:
            reasons = reasons or f"the warm-up reached --max-seconds {plan.max_seconds:g}"
        raise PlannerError(
            f"no request completed ({reasons or 'none was sent'}); first error: "
            + next(
                (r.error or "" for r in (result.records or result.warmup_records) if r.error), "-"
            )
        )


def _read_trace(
    ctx: typer.Context,
    dataset: str | None,
    model: str | None,
    start: str | None,
    end: str | None,
    speedup: float | None,
    requests: int,
) -> Trace:
    from planner.bench.replay import check_speedup, read_trace
    from planner.ingest.options import parse_start

    if dataset is None:
        raise UsageError("--pattern replay needs --dataset NAME (an ingested dataset)")
    window_start = parse_start(start, "--start")
    window_end = parse_start(end, "--end")
    factor = check_speedup(1.0 if speedup is None else speedup)
    with store_session(ctx) as session:
        return read_trace(
            session,
            dataset,
            model=model,
            start=window_start,
            end=window_end,
            speedup=factor,
            max_requests=requests,
        )


def _sweep(
    base_url: str,
    kind: EndpointKind,
    model: str | None,
    api_key: str | None,
    shape: RequestShape,
    sweep: SweepPlan,
    slo: SloTargets,
    timeout: float,
    deployment: Deployment,
    check_names: Callable[[Target], None],
    out: Path | None,
    out_csv: Path | None,
    json_output: bool,
    store_as: tuple[typer.Context, str | None] | None,
) -> None:
    """``--pattern sweep``: run the stages, then write, store and print them."""
    import asyncio

    from planner.bench.loadgen import run_sweep
    from planner.bench.metrics import summarize

    with progress_bar(sweep.max_requests, show=True) as progress:
        counter = _Counter(progress)

        def on_stage(index: int, stage: StageKind, plan: LoadPlan) -> None:
            prefix = f"stage {index + 1}/{sweep.points} ({_stage_label(stage, plan)}): "
            counter.stage(prefix, plan.max_requests)

        async def work(target: Target, stop: asyncio.Event) -> SweepResult:
            return await run_sweep(
                target,
                shape,
                sweep,
                timeout=timeout,
                on_stage=on_stage,
                on_record=counter.record,
                stop=stop,
            )

        target, measured = asyncio.run(
            _measure(base_url, kind, model, api_key, timeout, work, check_names)
        )
    source = str(out) if out is not None else target.shown_url
    runs = []
    for index, stage in enumerate(measured.stages):
        result = stage.result
        info = run_info(
            target,
            deployment,
            calibration_load(stage.plan),
            source=source,
            index=index,
            label=_stage_label(stage.kind, stage.plan),
            started=result.started_at.isoformat(),
        )
        runs.append(bench_run_of(summarize(result.records, result.duration, slo), info))
    document = sweep_document(target, shape, sweep, slo, timeout, measured, runs)
    if deployment.given or deployment.tp is not None:
        document["planner"]["deployment"] = deployment.to_dict(target.model)
    for index, stage in enumerate(measured.stages):
        if stage.result.stopped == "seconds":
            stderr.print(
                f"stage {index + 1} ({_stage_label(stage.kind, stage.plan)}) stopped at "
                f"--max-seconds {sweep.max_seconds:g} after {len(stage.result.records)} requests",
                markup=False,
            )
    if measured.stopped == "interrupted":
        current = measured.stages[-1].result
        stderr.print(
            f"interrupted: kept {len(measured.stages) - 1} finished stage(s) and the "
            f"{len(current.records)} requests of stage {len(measured.stages)} measured so far",
            markup=False,
        )
    elif measured.note is not None:
        stderr.print(f"sweep ended early: {measured.note}", markup=False)
    if out is not None:
        sidecar = write_sweep(out, document, measured)
        stderr.print(f"wrote {out} and {sidecar}", markup=False)
    if out_csv is not None:
        write_calibration_rows(
            [(run, stage.result) for run, stage in zip(runs, measured.stages, strict=True)],
            out_csv,
        )
    if store_as is not None:
        ctx, run_name = store_as
        group = run_name or f"sweep-{measured.stages[0].result.started_at:%Y%m%d-%H%M%S}"
        store_runs(
            ctx,
            [
                (run, stage.result.records, {**document["planner"], "stage": index + 1})
                for index, (run, stage) in enumerate(zip(runs, measured.stages, strict=True))
            ],
            group,
            group=group,
            target=target.shown_url,
        )
    if json_output:
        print_json(document)
    else:
        print_sweep(document)
    print_stream_notes(document["runs"])
    if not any(run.completed for run in runs):
        first_error = next(
            (r.error for s in measured.stages for r in s.result.records if r.error), "-"
        )
        raise PlannerError(
            f"no request completed in any stage of the sweep; first error: {first_error}"
        )


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
    import asyncio

    from planner.bench.engine import TorchServingEngine, engine_spec
    from planner.bench.server import BenchServer, Faults, ModelEngine, check_limits, check_speed
    from planner.common.net import check_listen_host, is_loopback_host

    backend = check_choice("--backend", backend, SERVE_BACKENDS)
    check_speed(speed)
    check_limits(read_timeout, idle_timeout, max_connections)
    check_listen_host(host, example=BENCH_DEFAULT_HOST)
    if not is_loopback_host(host):
        stderr.print(
            f"warning: --host {host} is not a loopback address; anyone who can reach it can "
            "use this server",
            markup=False,
        )
    faults = Faults(fail_every, stall_every, drop_every, stall_seconds)
    engine: ModelEngine | TorchServingEngine
    if backend == "torch":
        engine = TorchServingEngine(
            engine_spec(model, checkpoint),
            precision=precision or "fp32",
            device=device,
            threads=threads,
            max_seqs=max_seqs,
            max_len=max_len,
            seed=seed,
            checkpoint=checkpoint,
        )
    else:
        if checkpoint is not None:
            raise UsageError("--checkpoint goes with --backend torch (real weights, computed)")
        engine = ModelEngine(gpu, model or "llama-3.1-8b", precision or "bf16", speed=speed)
    server = BenchServer(
        engine,
        model_name=engine.model_name,
        host=host,
        port=port,
        faults=faults,
        allow_remote=True,
        read_timeout=read_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
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

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve())
    finally:
        if isinstance(engine, TorchServingEngine):
            engine.close()  # joins its worker thread
    stderr.print("stopped", markup=False)
