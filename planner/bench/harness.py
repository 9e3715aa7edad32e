"""The benchmark client's run, as ``planner bench run`` and its use case
(:func:`planner.usecases.bench_run.run_bench`) drive it: a load pattern or a sweep checked from its
options, the measurement against a server (stopped by Ctrl-C, keeping what was measured), and
what a run records: its metadata, its ``--out`` files, its calibration rows."""

from __future__ import annotations

import contextlib
import json
import platform
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import planner
from planner.common.files import atomic_output
from planner.common.text import printable, shown
from planner.errors import UsageError

if TYPE_CHECKING:
    import asyncio

    from planner.bench.client import EndpointKind, RequestShape, Target
    from planner.bench.loadgen import LoadPlan, RunResult, StageKind, SweepPlan, SweepResult
    from planner.bench.metrics import SloTargets
    from planner.bench.replay import Trace
    from planner.bench.results import BenchRun, Load, RunInfo, Stats

DEFAULT_SWEEP_CONCURRENCY = 16
DEFAULT_SWEEP_POINTS = 8
TOOL = "planner bench run"
T = TypeVar("T")


class Note(Protocol):
    """Where a run's notes go (stderr in the CLI); ``soft_wrap``: a long one may run past the
    width instead of being wrapped."""

    def __call__(self, text: str, *, soft_wrap: bool = False) -> None: ...


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


def only_with(pattern: str, wanted: str, given: dict[str, object | None]) -> None:
    """Options that only ``--pattern wanted`` reads must not be given to another pattern."""
    if pattern == wanted:
        return
    for option, value in given.items():
        if value is not None:
            raise UsageError(f"{option} goes with --pattern {wanted}, not {pattern}")


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


def write_calibration_rows(
    runs: list[tuple[BenchRun, RunResult]], out_csv: Path, note: Note
) -> None:
    """``--out-csv``: the runs' measurement rows, leaving out runs stopped by Ctrl-C (their
    throughputs count a cut-off end)."""
    from planner.bench.results import measurement_rows, write_measurements

    kept = [run for run, result in runs if result.stopped != "interrupted"]
    if len(kept) < len(runs):
        note(f"note: --out-csv leaves out {len(runs) - len(kept)} interrupted run(s)")
    rows = measurement_rows(kept)
    if not rows:
        note(
            f"note: no measurement rows to write to {printable(str(out_csv))} "
            "(no run completed a request)"
        )
        return
    write_measurements(rows, out_csv)
    engine = kept[0].info.engine
    note(
        f"wrote {len(rows)} measurement rows to {printable(str(out_csv))}; fit them with "
        f"`planner calibrate {printable(str(out_csv))} --name NAME --engine {engine}`",
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


def stage_label(kind: StageKind, plan: LoadPlan) -> str:
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


async def measure(
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
    with stopped_by_signals(stop):
        result = await work(target, stop)
    return target, result


@contextlib.contextmanager
def stopped_by_signals(stop: asyncio.Event) -> Iterator[None]:
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
