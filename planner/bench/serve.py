"""``planner bench serve``'s work: an OpenAI-compatible streaming endpoint on this machine, its
tokens computed by the in-process PyTorch engine (``torch``) or timed by planner's latency model
(``model``), served until Ctrl-C or SIGTERM. The CLI parses the options into a
:class:`ServeRequest` and calls :func:`serve`."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from planner.bench.harness import Note, check_choice, stopped_by_signals
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.bench.engine import TorchServingEngine
    from planner.bench.server import BenchServer, ModelEngine

BACKENDS = ("model", "torch")


@dataclass(frozen=True)
class ServeRequest:
    """Where to listen, which engine makes the tokens, and the faults and limits served."""

    host: str
    port: int
    backend: str = "model"
    gpu: str = "L4"
    model: str | None = None
    precision: str | None = None
    speed: float = 1.0
    device: str = "cpu"
    threads: int = 1
    max_seqs: int = 8
    max_len: int | None = None
    seed: int = 0
    checkpoint: Path | None = None
    fail_every: int = 0
    stall_every: int = 0
    drop_every: int = 0
    stall_seconds: float = 3600.0
    read_timeout: float = 10.0
    idle_timeout: float = 60.0
    max_connections: int | None = None


def _engine(request: ServeRequest, backend: str) -> ModelEngine | TorchServingEngine:
    from planner.bench.engine import TorchServingEngine, engine_spec
    from planner.bench.server import ModelEngine

    if backend == "torch":
        return TorchServingEngine(
            engine_spec(request.model, request.checkpoint),
            precision=request.precision or "fp32",
            device=request.device,
            threads=request.threads,
            max_seqs=request.max_seqs,
            max_len=request.max_len,
            seed=request.seed,
            checkpoint=request.checkpoint,
        )
    if request.checkpoint is not None:
        raise UsageError("--checkpoint goes with --backend torch (real weights, computed)")
    return ModelEngine(
        request.gpu,
        request.model or "llama-3.1-8b",
        request.precision or "bf16",
        speed=request.speed,
    )


def serve(request: ServeRequest, note: Note) -> None:
    """Check the request, build the engine and the server, and serve until stopped."""
    import asyncio

    from planner.bench.engine import TorchServingEngine
    from planner.bench.server import (
        DEFAULT_HOST,
        BenchServer,
        Faults,
        check_limits,
        check_speed,
    )
    from planner.common.net import check_listen_host, is_loopback_host

    backend = check_choice("--backend", request.backend, BACKENDS)
    check_speed(request.speed)
    check_limits(request.read_timeout, request.idle_timeout, request.max_connections)
    check_listen_host(request.host, example=DEFAULT_HOST)
    if not is_loopback_host(request.host):
        note(
            f"warning: --host {request.host} is not a loopback address; anyone who can reach "
            "it can use this server"
        )
    faults = Faults(
        request.fail_every, request.stall_every, request.drop_every, request.stall_seconds
    )
    engine = _engine(request, backend)
    server = BenchServer(
        engine,
        model_name=engine.model_name,
        host=request.host,
        port=request.port,
        faults=faults,
        allow_remote=True,
        read_timeout=request.read_timeout,
        idle_timeout=request.idle_timeout,
        max_connections=request.max_connections,
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(server, engine.description, note))
    finally:
        if isinstance(engine, TorchServingEngine):
            engine.close()  # joins its worker thread
    note("stopped")


async def _serve(server: BenchServer, description: str, note: Note) -> None:
    import asyncio

    await server.start()
    note(
        f"serving {description} at {server.url} (/v1/completions, "
        "/v1/chat/completions, /v1/models, /health); Ctrl-C stops",
        soft_wrap=True,
    )
    stop = asyncio.Event()
    serving = asyncio.create_task(server.serve_forever())
    try:
        with stopped_by_signals(stop):  # Ctrl-C or SIGTERM
            await stop.wait()
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await server.close()
