"""``bench run``: measure a server under a load pattern, a sweep or a replayed dataset, and
keep the run.

It checks its request, reads the store only after that (a replay's dataset, the names asked
for), does the work with :mod:`planner.bench`, writes the files asked for, stores the runs, and
returns what the shells render; a note for the user (a run stopped early, a file written, the
names stored) goes to ``progress.note`` as it happens.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from planner.access import Action, require
from planner.bench.harness import (
    Deployment,
    bench_run_of,
    calibration_load,
    check_calibration_names,
    check_choice,
    load_plan,
    measure,
    only_with,
    run_info,
    run_metadata,
    stage_label,
    sweep_document,
    sweep_plan,
    vllm_settings,
    write_calibration_rows,
    write_sweep,
)
from planner.common.files import check_output_path
from planner.errors import NotFoundError, UsageError
from planner.usecases import SessionScope
from planner.usecases._bench import (
    RunProgress,
    RunToStore,
    Silent,
    check_free_names,
    open_store,
    store_noted,
)

if TYPE_CHECKING:
    import asyncio

    from sqlalchemy.orm import Session

    from planner.bench.client import EndpointKind, RequestShape, Target
    from planner.bench.loadgen import LoadPlan, RunResult, StageKind, SweepPlan, SweepResult
    from planner.bench.metrics import SloTargets
    from planner.bench.replay import Trace

T = TypeVar("T")


@dataclass(frozen=True)
class ReplayWindow:
    """``--pattern replay``'s dataset and the part of it sent (times as given, ISO 8601)."""

    dataset: str | None = None
    model: str | None = None
    start: str | None = None
    end: str | None = None
    speedup: float | None = None


@dataclass(frozen=True)
class BenchRunRequest:
    """A ``bench run``: the server, the load, the requests' shape, the outputs."""

    url: str
    endpoint: str = "completions"
    model: str | None = None
    pattern: str = "sync"
    concurrency: int | None = None
    rate: float | None = None
    requests: int = 100
    max_seconds: float = 600.0
    warmup: int = 1
    ramp: float = 1.0
    seed: int = 0
    sweep_points: int | None = None
    sweep_kind: str | None = None
    replay: ReplayWindow = field(default_factory=ReplayWindow)
    input_tokens: int = 128
    output_tokens: int = 128
    ignore_eos: bool = True
    timeout: float = 60.0
    slo_ttft: float | None = None
    slo_tpot: float | None = None
    slo_e2e: float | None = None
    api_key: str | None = None
    out: Path | None = None
    store: bool = True
    name: str | None = None
    out_csv: Path | None = None
    deployment: Deployment = field(default_factory=Deployment)


@dataclass(frozen=True)
class BenchRunResult:
    """A measured run or sweep: ``document`` as ``--json`` prints it (a run: vLLM's summary
    keys and planner's metadata under ``planner``; a sweep: ``planner`` and ``runs``), the
    summaries of its runs, and why it failed, if no request completed."""

    document: dict[str, Any]
    summaries: list[dict[str, Any]]
    sweep: bool
    failure: str | None = None


@dataclass(frozen=True)
class _Checked:
    base_url: str
    kind: EndpointKind
    pattern: str
    shape: RequestShape
    slo: SloTargets
    rows_to: Path | None


def run_bench(
    request: BenchRunRequest, sessions: SessionScope, *, progress: RunProgress | None = None
) -> BenchRunResult:
    """Measure the server the request names, write and store what it asks for, and return the
    run (or the sweep's stages)."""
    from planner.bench.client import is_loopback_url
    from planner.common.secrets import redact_url

    require(Action.BENCH)  # it sends load to a server, stored or not
    shown = progress or Silent()
    checked = _check(request, shown)
    sweep: SweepPlan | None = None
    trace: Trace | None = None
    plan: LoadPlan | None = None
    if checked.pattern == "sweep":
        sweep = sweep_plan(
            concurrency=request.concurrency,
            rate=request.rate,
            requests=request.requests,
            max_seconds=request.max_seconds,
            warmup=request.warmup,
            ramp=request.ramp,
            seed=request.seed,
            points=request.sweep_points,
            kind=request.sweep_kind,
        )
    else:
        if checked.pattern == "replay":
            trace = _replay_trace(request.replay, request.requests, sessions)
        plan = load_plan(
            checked.pattern,
            concurrency=request.concurrency,
            rate=request.rate,
            requests=request.requests,
            max_seconds=request.max_seconds,
            warmup=request.warmup,
            ramp=request.ramp,
            seed=request.seed,
            trace=trace,
        )
    check_free_names(
        sessions, request.store, request.name, sweep.points if sweep is not None else 0
    )
    if not is_loopback_url(checked.base_url):
        shown.note(f"note: measuring a remote server, {redact_url(checked.base_url)}")
    if sweep is not None:
        return _run_sweep(request, checked, sweep, sessions, shown)
    return _run_once(request, checked, cast("LoadPlan", plan), trace, sessions, shown)


def _check(request: BenchRunRequest, progress: RunProgress) -> _Checked:
    """The request's options, checked before the store is read or a request sent."""
    from planner.bench.client import ENDPOINT_PATHS, RequestShape, check_url
    from planner.bench.loadgen import PATTERNS
    from planner.bench.metrics import SloTargets, requests_path

    base_url = check_url(request.url)
    kind = cast("EndpointKind", check_choice("--endpoint", request.endpoint, tuple(ENDPOINT_PATHS)))
    name = check_choice("--pattern", request.pattern, (*PATTERNS, "sweep"))
    only_with(
        name, "sweep", {"--sweep-points": request.sweep_points, "--sweep-kind": request.sweep_kind}
    )
    replay = request.replay
    only_with(
        name,
        "replay",
        {
            "--dataset": replay.dataset,
            "--dataset-model": replay.model,
            "--start": replay.start,
            "--end": replay.end,
            "--speedup": replay.speedup,
        },
    )
    shape = RequestShape(request.input_tokens, request.output_tokens, request.ignore_eos)
    slo = SloTargets(request.slo_ttft, request.slo_tpot, request.slo_e2e)
    if not (math.isfinite(request.timeout) and request.timeout > 0):
        raise UsageError(f"--timeout {request.timeout:g}: expected a positive number of seconds")
    tp = request.deployment.tp
    if tp is not None and tp < 1:
        raise UsageError(f"--tp {tp}: expected 1 or more GPUs")
    out_csv = request.out_csv
    if out_csv is not None:
        check_output_path(out_csv, "--out-csv")
        if name == "replay":
            progress.note(
                "note: --out-csv is skipped for --pattern replay: a trace's mixed lengths "
                "are not a calibration point (measure one shape, or a sweep, for those)"
            )
        else:
            request.deployment.check_for_rows()
    if request.out is not None:
        check_output_path(request.out, "--out")
        check_output_path(requests_path(request.out), "--out")  # the per-request file beside it
    rows_to = out_csv if name != "replay" else None
    return _Checked(base_url, kind, name, shape, slo, rows_to)


def _replay_trace(window: ReplayWindow, requests: int, sessions: SessionScope) -> Trace:
    from planner.bench.replay import check_speedup
    from planner.ingest.options import parse_start

    if window.dataset is None:
        raise UsageError("--pattern replay needs --dataset NAME (an ingested dataset)")
    start = parse_start(window.start, "--start")
    end = parse_start(window.end, "--end")
    factor = check_speedup(1.0 if window.speedup is None else window.speedup)
    with open_store(sessions) as session:
        return read_trace(
            session,
            window.dataset,
            model=window.model,
            start=start,
            end=end,
            speedup=factor,
            max_requests=requests,
        )


def read_trace(
    session: Session,
    dataset: str,
    *,
    model: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    speedup: float = 1.0,
    max_requests: int | None = None,
) -> Trace:
    """The first ``max_requests`` requests of the stored ``dataset`` (those of ``model`` only,
    when given, arriving in ``[start, end)``) as a trace (:func:`planner.bench.replay.trace_of`).
    An unknown dataset (with the closest names), an unknown model (with the dataset's models)
    or an empty window is a :class:`UsageError`. ``start`` and ``end`` are timezone-aware."""
    from planner.bench.replay import check_trace_options, trace_of, unknown_model
    from planner.store.queries import dataset_models, get_dataset
    from planner.store.requests import request_frame

    check_trace_options(speedup, max_requests, start, end)
    try:
        stored = get_dataset(session, dataset)
    except NotFoundError as exc:
        raise UsageError(f"--dataset: {exc}") from None
    frame = request_frame(session, stored.id)
    if model is not None:
        frame = frame[frame["model"] == model]
        if frame.empty:
            raise unknown_model(dataset, model, dataset_models(session, stored))
    return trace_of(
        frame,
        dataset,
        model=model,
        start=start,
        end=end,
        speedup=speedup,
        max_requests=max_requests,
    )


def _names_check(
    request: BenchRunRequest, checked: _Checked, plan: LoadPlan | SweepPlan
) -> Callable[[Target], None]:
    """``--out-csv``'s names, checked once the served model is known, before any request."""

    def check_names(target: Target) -> None:
        if checked.rows_to is None:
            return
        first = (
            cast("SweepPlan", plan).synchronous()
            if checked.pattern == "sweep"
            else cast("LoadPlan", plan)
        )
        info = run_info(
            target,
            request.deployment,
            calibration_load(first),
            source=str(request.out) if request.out is not None else target.shown_url,
            index=0,
            label="",
            started=None,
        )
        check_calibration_names(
            info, checked.shape, named_model=request.deployment.model is not None
        )

    return check_names


def _run_once(
    request: BenchRunRequest,
    checked: _Checked,
    plan: LoadPlan,
    trace: Trace | None,
    sessions: SessionScope,
    progress: RunProgress,
) -> BenchRunResult:
    import asyncio

    from planner.bench.loadgen import run_load
    from planner.bench.metrics import summarize, write_run

    with progress.measuring(plan.max_requests):
        progress.stage("", plan.max_requests)

        async def work(target: Target, stop: asyncio.Event) -> RunResult:
            return await run_load(
                target,
                checked.shape,
                plan,
                timeout=request.timeout,
                on_record=progress.record,
                stop=stop,
            )

        target, result = asyncio.run(_measure(request, checked, work, plan))
    summary = summarize(result.records, result.duration, checked.slo)
    metadata = run_metadata(target, checked.shape, plan, checked.slo, request.timeout, result)
    if trace is not None:
        metadata["replay"] = trace.describe()
    deployment = request.deployment
    if deployment.given or deployment.tp is not None:
        metadata["deployment"] = deployment.to_dict(target.model)
    started = result.started_at.strftime("%Y%m%d-%H%M%S")
    document = {**vllm_settings(target, plan, started), **summary}
    _note_stopped(result, plan, progress)
    if request.out is not None:
        sidecar = write_run(request.out, document, metadata, result.records)
        metadata["requests_file"] = sidecar.name  # as the file says
        progress.note(f"wrote {request.out} and {sidecar}")
    info = run_info(
        target,
        deployment,
        calibration_load(plan),
        source=str(request.out) if request.out is not None else target.shown_url,
        index=0,
        label=plan.pattern,
        started=result.started_at.isoformat(),
    )
    measured_run = bench_run_of(summary, info)
    if checked.rows_to is not None:
        write_calibration_rows([(measured_run, result)], checked.rows_to, progress.note)
    if request.store:
        kept: list[RunToStore] = [(measured_run, result.records, metadata)]
        store_noted(sessions, progress, kept, request.name, group=None, target=target.shown_url)
    return BenchRunResult(
        {**document, "planner": metadata},
        [summary],
        sweep=False,
        failure=_failure(summary, result, plan),
    )


async def _measure(
    request: BenchRunRequest,
    checked: _Checked,
    work: Callable[[Target, asyncio.Event], Awaitable[T]],
    plan: LoadPlan | SweepPlan,
) -> tuple[Target, T]:
    return await measure(
        checked.base_url,
        checked.kind,
        request.model,
        request.api_key,
        request.timeout,
        work,
        _names_check(request, checked, plan),
    )


def _note_stopped(result: RunResult, plan: LoadPlan, progress: RunProgress) -> None:
    if result.stopped == "interrupted":
        progress.note(f"interrupted: kept the {len(result.records)} requests measured so far")
    elif result.stopped == "seconds":
        progress.note(
            f"stopped at --max-seconds {plan.max_seconds:g} after {len(result.records)} requests"
            + (
                " (the warm-up reached it: no request was measured)"
                if not result.records and result.warmup_records
                else ""
            )
        )


def _failure(summary: dict[str, Any], result: RunResult, plan: LoadPlan) -> str | None:
    """Why a run failed: no request completed."""
    if summary["completed"] != 0:
        return None
    reasons = ", ".join(
        [f"{n} x {k}" for k, n in summary["failure_reasons"].items()]
        + ([f"{summary['short']} x short"] if summary["short"] else [])
    )
    if not result.records and result.warmup_records:
        reasons = reasons or f"the warm-up reached --max-seconds {plan.max_seconds:g}"
    first_error = next(
        (r.error or "" for r in (result.records or result.warmup_records) if r.error), "-"
    )
    return f"no request completed ({reasons or 'none was sent'}); first error: " + first_error


def _run_sweep(
    request: BenchRunRequest,
    checked: _Checked,
    sweep: SweepPlan,
    sessions: SessionScope,
    progress: RunProgress,
) -> BenchRunResult:
    """``--pattern sweep``: run the stages, then write and store them."""
    import asyncio

    from planner.bench.loadgen import run_sweep
    from planner.bench.metrics import summarize

    with progress.measuring(sweep.max_requests):

        def on_stage(index: int, stage: StageKind, plan: LoadPlan) -> None:
            prefix = f"stage {index + 1}/{sweep.points} ({stage_label(stage, plan)}): "
            progress.stage(prefix, plan.max_requests)

        async def work(target: Target, stop: asyncio.Event) -> SweepResult:
            return await run_sweep(
                target,
                checked.shape,
                sweep,
                timeout=request.timeout,
                on_stage=on_stage,
                on_record=progress.record,
                stop=stop,
            )

        target, measured = asyncio.run(_measure(request, checked, work, sweep))
    out = request.out
    source = str(out) if out is not None else target.shown_url
    runs = []
    for index, stage in enumerate(measured.stages):
        result = stage.result
        info = run_info(
            target,
            request.deployment,
            calibration_load(stage.plan),
            source=source,
            index=index,
            label=stage_label(stage.kind, stage.plan),
            started=result.started_at.isoformat(),
        )
        runs.append(bench_run_of(summarize(result.records, result.duration, checked.slo), info))
    document = sweep_document(
        target, checked.shape, sweep, checked.slo, request.timeout, measured, runs
    )
    if request.deployment.given or request.deployment.tp is not None:
        document["planner"]["deployment"] = request.deployment.to_dict(target.model)
    _note_sweep_stopped(measured, sweep, progress)
    if out is not None:
        sidecar = write_sweep(out, document, measured)
        progress.note(f"wrote {out} and {sidecar}")
    stages = list(zip(runs, measured.stages, strict=True))
    if checked.rows_to is not None:
        write_calibration_rows(
            [(run, stage.result) for run, stage in stages], checked.rows_to, progress.note
        )
    if request.store:
        group = request.name or f"sweep-{measured.stages[0].result.started_at:%Y%m%d-%H%M%S}"
        kept = [
            (run, stage.result.records, {**document["planner"], "stage": index + 1})
            for index, (run, stage) in enumerate(stages)
        ]
        store_noted(sessions, progress, kept, group, group=group, target=target.shown_url)
    failure = None
    if not any(run.completed for run in runs):
        first_error = next(
            (r.error for s in measured.stages for r in s.result.records if r.error), "-"
        )
        failure = f"no request completed in any stage of the sweep; first error: {first_error}"
    return BenchRunResult(document, document["runs"], sweep=True, failure=failure)


def _note_sweep_stopped(measured: SweepResult, sweep: SweepPlan, progress: RunProgress) -> None:
    for index, stage in enumerate(measured.stages):
        if stage.result.stopped == "seconds":
            progress.note(
                f"stage {index + 1} ({stage_label(stage.kind, stage.plan)}) stopped at "
                f"--max-seconds {sweep.max_seconds:g} after {len(stage.result.records)} requests"
            )
    if measured.stopped == "interrupted":
        current = measured.stages[-1].result
        progress.note(
            f"interrupted: kept {len(measured.stages) - 1} finished stage(s) and the "
            f"{len(current.records)} requests of stage {len(measured.stages)} measured so far"
        )
    elif measured.note is not None:
        progress.note(f"sweep ended early: {measured.note}")
