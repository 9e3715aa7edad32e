"""The in-process PyTorch engine: its KV cache agrees with recomputing whole sequences, its
shapes and dtypes follow the catalog model, static batches are timed on both clocks and
written as calibration rows that read back, and the continuous-batching serving engine hands
each request its tokens (over real loopback HTTP too) and frees the slots of those that go."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from planner.bench.engine import (
    TOKEN_WORDS,
    Point,
    Timing,
    TorchEngine,
    TorchServingEngine,
    TransformerLM,
    _median_point,
    engine_rows,
    engine_spec,
    load_spec,
    measure_grid,
    measure_static_batch,
    spec_from_checkpoint,
    token_text,
)
from planner.bench.results import write_measurements
from planner.bench.server import BenchServer, ServerThread
from planner.errors import PlannerError, UsageError
from planner.latency.calibration import MEASUREMENT_COLUMNS, read_measurements
from planner.latency.catalog import load_catalog

pytestmark = pytest.mark.bench

CATALOG_TINY = load_catalog().models.get("bench-llama-tiny")
# smaller than the catalog's tiny model, so each test takes milliseconds
TINY = dataclasses.replace(
    CATALOG_TINY,
    name="test-tiny",
    layers=2,
    hidden_size=128,
    attention_heads=4,
    kv_heads=2,
    head_dim=32,
    intermediate_size=256,
    vocab_size=1000,
    max_context=256,
)


@pytest.fixture(scope="module")
def engine() -> TorchEngine:
    return TorchEngine(TINY, slots=4, max_len=128)


def test_cached_decoding_gives_the_logits_of_whole_sequences(engine: TorchEngine) -> None:
    tokens = torch.randint(0, TINY.vocab_size, (2, 14), generator=torch.Generator().manual_seed(3))
    reference = engine.model.logits_without_cache(tokens)  # [2, 14, vocab]
    # two sequences started at different lengths in slots that are not neighbours, then
    # decoded together: the shorter one's padding must be masked
    first = engine.prefill_logits([3], tokens[:1, :5])
    second = engine.prefill_logits([1], tokens[1:, :9])
    torch.testing.assert_close(first[0], reference[0, 4], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(second[0], reference[1, 8], rtol=1e-4, atol=1e-4)
    for step in range(5):
        given = [int(tokens[0, 5 + step]), int(tokens[1, 9 + step])]
        logits = engine.decode_logits([3, 1], given)
        torch.testing.assert_close(logits[0], reference[0, 5 + step], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(logits[1], reference[1, 9 + step], rtol=1e-4, atol=1e-4)
    assert engine.lengths[3] == 10 and engine.lengths[1] == 14
    # the cache holds the keys: scrambling it changes what decoding computes
    engine.keys[0][3].normal_()
    scrambled = engine.decode_logits([3], [int(tokens[0, 10])])
    assert not torch.allclose(scrambled[0], reference[0, 10], atol=1e-3)
    engine.free([1, 3])
    assert engine.lengths == [0, 0, 0, 0]


def test_greedy_tokens_follow_the_logits(engine: TorchEngine) -> None:
    prompts = engine.random_prompts(2, 6)
    reference = engine.model.logits_without_cache(prompts)
    first = engine.prefill([0, 1], prompts)
    assert first == reference[:, -1].argmax(-1).tolist()
    extended = torch.cat((prompts, torch.tensor(first).unsqueeze(1)), dim=1)
    second = engine.decode([0, 1])
    assert second == engine.model.logits_without_cache(extended)[:, -1].argmax(-1).tolist()
    engine.free([0, 1])


def test_shapes_follow_the_catalog_model_with_grouped_query_attention() -> None:
    model = TransformerLM(CATALOG_TINY, seed=1)
    w = model.weights
    assert w["model.layers.0.self_attn.q_proj.weight"].shape == (8 * 64, 512)
    assert w["model.layers.0.self_attn.k_proj.weight"].shape == (2 * 64, 512)  # 2 KV heads
    assert w["model.layers.3.mlp.gate_proj.weight"].shape == (1408, 512)
    assert w["lm_head.weight"].shape == (32000, 512)  # untied
    assert "model.layers.4.mlp.up_proj.weight" not in w
    engine = TorchEngine(CATALOG_TINY, slots=2, max_len=64)
    assert engine.keys[0].shape == (2, 2, 64, 64)  # [slots, kv_heads, max_len, head_dim]
    assert len(engine.keys) == len(engine.values) == 4
    tied = TransformerLM(dataclasses.replace(TINY, tied_embeddings=True))
    assert "lm_head.weight" not in tied.weights
    assert tied.lm_head is tied.weights["model.embed_tokens.weight"]


def test_weights_are_seeded() -> None:
    name = "model.layers.1.mlp.down_proj.weight"
    same = TransformerLM(TINY, seed=5).weights[name], TransformerLM(TINY, seed=5).weights[name]
    assert torch.equal(*same)
    assert not torch.equal(same[0], TransformerLM(TINY, seed=6).weights[name])
    assert 0.015 < float(same[0].std()) < 0.025


@pytest.mark.parametrize(
    ("precision", "dtype"), [("bf16", torch.bfloat16), ("fp16", torch.float16)]
)
def test_half_precisions_run_without_overflow(precision: str, dtype: torch.dtype) -> None:
    engine = TorchEngine(TINY, precision=precision, slots=2, max_len=64)
    assert engine.keys[0].dtype == engine.model.weights["lm_head.weight"].dtype == dtype
    prompts = engine.random_prompts(2, 16)
    logits = engine.prefill_logits([0, 1], prompts)
    assert torch.isfinite(logits).all()
    engine.decode([0, 1])
    point = measure_static_batch(engine, 2, 16, 3)
    assert point.cpu.tpot_ms is not None and point.cpu.tpot_ms > 0


def test_refusals_name_what_is_wrong() -> None:
    moe = load_catalog().models.get("mixtral-8x7b")
    with pytest.raises(UsageError, match=r"mixtral-8x7b is a mixture of experts"):
        TransformerLM(moe)
    with pytest.raises(UsageError, match=r"mixtral-8x7b is a mixture of experts"):
        load_spec("mixtral-8x7b")
    with pytest.raises(UsageError, match=r"--model: unknown model"):
        load_spec("no-such-model")
    with pytest.raises(UsageError, match=r"--precision 'int4-awq'.*fp32, bf16, fp16"):
        TransformerLM(TINY, precision="int4-awq")
    with pytest.raises(UsageError, match=r"--device 'tpu': expected cpu or cuda"):
        TransformerLM(TINY, device="tpu")
    with pytest.raises(UsageError, match=r"--threads 0"):
        TorchEngine(TINY, threads=0)
    huge = dataclasses.replace(TINY, name="huge", vocab_size=10**12)
    with pytest.raises(UsageError, match=r"model huge in fp32: .* GiB of weights do not fit"):
        TransformerLM(huge)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_is_refused_where_torch_sees_no_gpu() -> None:
    with pytest.raises(UsageError, match=r"--device cuda: PyTorch sees no CUDA GPU"):
        TorchEngine(TINY, device="cuda")


def test_a_static_batch_is_timed_on_both_clocks(engine: TorchEngine) -> None:
    point = measure_static_batch(engine, 3, 20, 5)
    assert (point.batch, point.prompt_tokens, point.output_tokens, point.repeats) == (3, 20, 5, 1)
    for timing in (point.cpu, point.wall):
        assert timing.tpot_ms is not None
        assert 0 < timing.ttft_ms < timing.e2e_ms
        # E2E is the prefill plus the four decode steps
        assert timing.e2e_ms == pytest.approx(timing.ttft_ms + 4 * timing.tpot_ms)
    assert engine.lengths == [0, 0, 0, 0]  # the slots are free again
    single = measure_static_batch(engine, 1, 8, 1)
    assert single.cpu.tpot_ms is None and single.wall.ttft_ms == single.wall.e2e_ms


def test_much_more_work_takes_more_cpu_time() -> None:
    # 256 times the prefill tokens: far beyond what noise on a shared machine can turn round
    engine = TorchEngine(CATALOG_TINY, slots=8, max_len=520)
    small = measure_static_batch(engine, 1, 16, 2)
    large = measure_static_batch(engine, 8, 512, 2)
    assert large.cpu.ttft_ms > 5 * small.cpu.ttft_ms


def test_the_grid_keeps_medians_and_skips_what_does_not_fit(engine: TorchEngine) -> None:
    seen: list[Point] = []
    runs: list[None] = []
    result = measure_grid(
        engine,
        [1, 2, 8],
        [8, 16, 200],
        4,
        repeats=3,
        warmup=1,
        on_point=seen.append,
        on_run=lambda: runs.append(None),
    )
    assert result.stopped is None
    assert [(p.batch, p.prompt_tokens) for p in result.points] == [(1, 8), (1, 16), (2, 8), (2, 16)]
    assert seen == result.points
    assert len(runs) == 4 * (1 + 3)
    assert all(p.repeats == 3 for p in result.points)
    reasons = {(s.batch, s.prompt_tokens): s.reason for s in result.skipped}
    assert "exceed the KV cache's 128 positions" in reasons[(1, 200)]
    assert "batch 8 exceeds the KV cache's 4 sequence slots" in reasons[(8, 8)]
    assert len(reasons) == 5  # prompt 200 for batches 1 and 2, and batch 8 for all three


def test_a_point_is_the_median_of_its_repeats() -> None:
    def run(value: float) -> Point:
        return Point(2, 8, 3, wall=Timing(value, value / 10, value * 2), cpu=Timing(1, None, 1))

    point = _median_point([run(10.0), run(30.0), run(20.0)])
    assert point.repeats == 3 and (point.batch, point.prompt_tokens) == (2, 8)
    assert point.wall == Timing(20.0, 2.0, 40.0)
    assert point.cpu == Timing(1, None, 1)


def test_the_grid_stops_at_its_time_limit_and_on_ctrl_c(engine: TorchEngine) -> None:
    timed_out = measure_grid(engine, [1, 2], [8, 16], 2, repeats=2, warmup=0, max_seconds=1e-9)
    assert timed_out.stopped == "seconds"
    assert len(timed_out.points) <= 1

    def interrupt(_point: Point) -> None:
        raise KeyboardInterrupt

    interrupted = measure_grid(engine, [1, 2], [8, 16], 2, repeats=1, warmup=0, on_point=interrupt)
    assert interrupted.stopped == "interrupted"
    assert [(p.batch, p.prompt_tokens) for p in interrupted.points] == [(1, 8)]
    assert engine.lengths == [0, 0, 0, 0]


def test_rows_round_trip_through_calibration(engine: TorchEngine, tmp_path: Path) -> None:
    result = measure_grid(engine, [1, 2], [8], 3, repeats=1, warmup=0)
    rows = engine_rows(
        result.points,
        gpu="l4",  # catalog names are looked up as calibration looks them up
        model="bench-llama-tiny",
        precision="bf16",
        clock="wall",
        source="test run",
    )
    assert len(rows) == 2 * 3
    assert all(list(row) == list(MEASUREMENT_COLUMNS) for row in rows)
    assert {row["batch_or_concurrency"] for row in rows} == {"static=1", "static=2"}
    assert rows[0]["framework"] == f"planner in-process PyTorch {torch.__version__}"
    assert "wall clock" in rows[0]["notes"] and "median of 1 run" in rows[0]["notes"]
    path = tmp_path / "rows.csv"
    write_measurements(rows, path)
    points, excluded = read_measurements(path)
    assert excluded == []
    assert [(p.load_kind, p.load, p.metric) for p in points[:3]] == [
        ("static", 1.0, "ttft"),
        ("static", 1.0, "tpot"),
        ("static", 1.0, "e2e"),
    ]
    first = result.points[0].wall
    assert [p.value for p in points[:3]] == [first.ttft_ms, first.tpot_ms, first.e2e_ms]
    assert {(p.gpu, p.model, p.precision, p.tp, p.engine) for p in points} == {
        ("L4", "bench-llama-tiny", "bf16", 1, "torch")
    }
    cpu_rows = engine_rows(
        result.points, gpu="L4", model="bench-llama-tiny", precision="bf16", source="s"
    )
    assert cpu_rows[0]["value"] == repr(result.points[0].cpu.ttft_ms)
    with pytest.raises(
        UsageError, match=r"--gpu: calibration rows need catalog names; unknown GPU"
    ):
        engine_rows(
            result.points, gpu="my-laptop", model="bench-llama-tiny", precision="bf16", source="s"
        )


# --- serving -----------------------------------------------------------------------------------


@pytest.fixture
def serving() -> Iterator[TorchServingEngine]:
    with TorchServingEngine(TINY, max_seqs=2, max_len=128) as running:
        yield running
    assert not running.is_alive  # close() joined the worker


async def _collect(engine: TorchServingEngine, prompt: int, tokens: int) -> list[str]:
    return [text async for text, delay in engine.generate(prompt, tokens) if delay == 0.0]


def test_concurrent_requests_each_get_their_tokens(serving: TorchServingEngine) -> None:
    async def three() -> list[list[str]]:
        # three requests for two slots: the third waits for a slot to free
        return list(
            await asyncio.gather(
                _collect(serving, 10, 7), _collect(serving, 30, 12), _collect(serving, 5, 3)
            )
        )

    outputs = asyncio.run(three())
    assert [len(texts) for texts in outputs] == [7, 12, 3]
    words = {f" w{i}" for i in range(TOKEN_WORDS)}
    assert all(text in words for texts in outputs for text in texts)
    assert serving.running == 0
    assert token_text(1234) == " w234"


def test_a_client_that_goes_away_frees_its_slot(serving: TorchServingEngine) -> None:
    async def leave_early() -> None:
        stream = serving.generate(8, 100)
        first = await anext(stream)
        assert first[1] == 0.0
        assert serving.running == 1
        await stream.aclose()  # what the server does when the client disconnects

    asyncio.run(leave_early())
    deadline = time.monotonic() + 10
    while serving.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert serving.running == 0

    # both slots serve new requests
    async def two() -> list[list[str]]:
        return list(await asyncio.gather(_collect(serving, 4, 5), _collect(serving, 4, 6)))

    assert [len(texts) for texts in asyncio.run(two())] == [5, 6]


def test_requests_beyond_the_context_or_after_close_are_refused() -> None:
    serving = TorchServingEngine(TINY, max_seqs=1, max_len=64)
    assert serving.max_context == 64
    with pytest.raises(UsageError, match=r"60 prompt \+ 10 output tokens.*at most 64"):
        asyncio.run(_collect(serving, 60, 10))
    serving.close()
    assert not serving.is_alive
    with pytest.raises(PlannerError, match=r"closed"):
        asyncio.run(_collect(serving, 4, 2))


def test_the_serving_engine_behind_the_http_server() -> None:
    with (
        TorchServingEngine(TINY, max_seqs=4, max_len=128) as serving,
        ServerThread(BenchServer(serving, model_name=serving.model_name, port=0)) as server,
    ):

        async def ask() -> list[dict[str, object]]:
            async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
                answers = await asyncio.gather(
                    *(
                        client.post(
                            f"{server.url}/v1/completions",
                            json={"prompt": "a b c d e f", "max_tokens": n},
                        )
                        for n in (3, 9)
                    )
                )
                too_long = await client.post(
                    f"{server.url}/v1/completions", json={"prompt": "a b", "max_tokens": 500}
                )
            assert too_long.status_code == 400
            assert "maximum context length is 128" in too_long.text
            return [a.json() for a in answers]

        answers = asyncio.run(ask())
    assert [a["usage"]["completion_tokens"] for a in answers] == [3, 9]  # type: ignore[index]
    assert [len(a["choices"][0]["text"].split()) for a in answers] == [3, 9]  # type: ignore[index]


def test_imports_without_torch_and_says_how_to_install_it() -> None:
    script = (
        "import sys; sys.modules['torch'] = None\n"  # as if torch were not installed
        "import planner.bench.engine as engine, planner.cli.bench_engine\n"
        "from planner.errors import UsageError\n"
        "try:\n    engine.TorchEngine(None)\nexcept UsageError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "needs PyTorch: pip install 'planner[bench]'" in done.stdout


# --- a local checkpoint instead of random weights ----------------------------------------------


def _save_checkpoint(folder: Path, model: TransformerLM, **config: object) -> Path:
    """``model``'s weights as Hugging Face saves a Llama (config.json, model.safetensors)."""
    from safetensors.torch import save_file

    folder.mkdir()
    spec = model.spec
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": spec.layers,
                "hidden_size": spec.hidden_size,
                "num_attention_heads": spec.attention_heads,
                "num_key_value_heads": spec.kv_heads,
                "head_dim": spec.head_dim,
                "intermediate_size": spec.intermediate_size,
                "vocab_size": spec.vocab_size,
                "max_position_embeddings": spec.max_context,
                "tie_word_embeddings": spec.tied_embeddings,
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-5,
                **config,
            }
        )
    )
    save_file({k: v.contiguous() for k, v in model.weights.items()}, folder / "model.safetensors")
    return folder


def test_a_checkpoint_gives_its_own_weights_not_the_seeds(tmp_path: Path) -> None:
    saved = TransformerLM(TINY, seed=7)
    folder = _save_checkpoint(tmp_path / "tiny-ckpt", saved)
    spec = spec_from_checkpoint(folder)
    assert (spec.layers, spec.kv_heads, spec.vocab_size) == (2, 2, 1000)
    loaded = TransformerLM(spec, seed=99, checkpoint=folder)  # the seed is not used
    tokens = torch.randint(0, 1000, (1, 9), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(
        loaded.logits_without_cache(tokens), saved.logits_without_cache(tokens)
    )
    other = TransformerLM(TINY, seed=99)
    assert not torch.allclose(
        other.logits_without_cache(tokens), saved.logits_without_cache(tokens)
    )
    # labelled with a catalog model of another shape: refused, naming both
    with pytest.raises(UsageError, match="not the shape of --model bench-llama-tiny"):
        engine_spec("bench-llama-tiny", folder)
    assert engine_spec(None, folder).name == "tiny-ckpt"


def test_bad_checkpoints_are_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no config.json"):
        spec_from_checkpoint(tmp_path)
    qwen = _save_checkpoint(tmp_path / "qwen", TransformerLM(TINY), model_type="qwen2")
    with pytest.raises(UsageError, match="model_type 'qwen2'"):
        spec_from_checkpoint(qwen)
    wide = _save_checkpoint(tmp_path / "wide", TransformerLM(TINY), intermediate_size=512)
    with pytest.raises(UsageError, match=r"mlp\.\w+_proj\.weight has shape"):
        TransformerLM(spec_from_checkpoint(wide), checkpoint=wide)
    broken = _save_checkpoint(tmp_path / "broken", TransformerLM(TINY))
    (broken / "model.safetensors").write_bytes(b"not tensors")
    with pytest.raises(UsageError, match="not a safetensors file"):
        TransformerLM(spec_from_checkpoint(broken), checkpoint=broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(UsageError, match=r"no \*\.safetensors files"):
        TransformerLM(spec_from_checkpoint(broken), checkpoint=broken)
