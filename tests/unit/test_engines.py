"""Engine sizing (planner.latency.engines): the memory each engine gives weights, activations
and KV cache, worked out by hand from the models' config.json shapes, the GPU catalog's driver
totals and the engine rows (data/catalog/engines.csv), and compared with ``deploy`` and
``describe``; the KV-cache precision each engine picks when none is asked for.

The formulas are planner's (documented in planner/latency/model.py and engines.py): weights =
(linear params x weight bytes + embeddings x 2 B) / tp; activation reserve = runtime reserve +
max_batched_tokens x (4 x hidden + 2 x intermediate x top_k / tp) x 2 B + min(max_seqs,
max_batched_tokens) x vocab x logits bytes; KV cache = fraction x memory - weights - activations
(``total``, vLLM), fraction x (memory - weights - activations) (``free``, TensorRT-LLM) or
fraction x memory - weights (``static``, SGLang). Whether those match the engines is
tests/unit/test_kv_capacity_engines.py's business.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from planner.errors import UsageError
from planner.latency.catalog import UnsupportedError, load_catalog
from planner.latency.engines import deploy, engine_names, get_engine, kv_cache_bytes
from planner.latency.model import Deployment, DoesNotFitError, LatencyModel, describe
from planner.latency.profile import Profile

GIB = 1024**3
MIB = 1024**2
H100_MEMORY = 81559 * MIB  # the driver's total (gpus.csv device_memory_mib)
H200_MEMORY = 141 * GIB  # no published driver total: the nominal 141 GiB
A100_MEMORY = 81920 * MIB


@dataclass(frozen=True)
class Shape:
    """From each model's Hugging Face config.json."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # per expert for MoE
    vocab: int
    experts: int = 1
    top_k: int = 1

    @property
    def linear(self) -> int:
        attn = 2 * self.hidden * self.heads * self.head_dim
        attn += 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = self.experts * 3 * self.hidden * self.intermediate
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.layers * (attn + mlp + router)

    @property
    def embeddings(self) -> int:
        return 2 * self.vocab * self.hidden  # untied input embedding and LM head


LLAMA31_8B = Shape(32, 4096, 32, 8, 128, 14336, 128256)
LLAMA31_70B = Shape(80, 8192, 64, 8, 128, 28672, 128256)
MIXTRAL = Shape(32, 4096, 32, 8, 128, 14336, 32000, experts=8, top_k=2)


@dataclass(frozen=True)
class Case:
    engine: str
    model: str
    shape: Shape
    gpu: str
    memory: float
    precision: str
    weight_bytes: float  # per parameter of the linear layers
    tp: int
    rule: str
    fraction: float
    runtime_gib: float
    max_tokens: int
    max_seqs: int
    kv_cache: str
    kv_bytes: float

    def weights(self) -> float:
        return (self.shape.linear * self.weight_bytes + self.shape.embeddings * 2) / self.tp

    def activations(self) -> float:
        s = self.shape
        per_token = (4 * s.hidden + 2 * s.intermediate * s.top_k / self.tp) * 2
        logits = min(self.max_seqs, self.max_tokens) * s.vocab * 4
        return self.runtime_gib * GIB + self.max_tokens * per_token + logits

    def kv_bytes_per_token(self) -> float:
        return 2 * self.shape.layers * (self.shape.kv_heads // self.tp) * 128 * self.kv_bytes

    def kv(self) -> float:
        w, a, m, f = self.weights(), self.activations(), self.memory, self.fraction
        return {"total": f * m - w - a, "free": f * (m - w - a), "static": f * m - w}[self.rule]


CASES = [
    # vLLM: total rule, 0.9, 8192 tokens / 1024 seqs (>= 70 GiB, not A100), 0.25 GiB runtime
    Case(
        "vllm", "llama-3.1-8b", LLAMA31_8B, "H100-SXM", H100_MEMORY, "bf16", 2, 1,
        "total", 0.9, 0.25, 8192, 1024, "fp16", 2,
    ),
    # TensorRT-LLM: free rule, 0.9, 8192 tokens / 2048 seqs, 1.5 GiB; FP8 weights -> FP8 KV
    Case(
        "trtllm", "llama-3.1-70b", LLAMA31_70B, "H100-SXM", H100_MEMORY, "fp8", 1, 2,
        "free", 0.9, 1.5, 8192, 2048, "fp8", 1,
    ),
    # SGLang: static rule, 0.83, 8192 tokens / 2048 seqs, 1.5 GiB; MoE, top-2 of 8 experts
    Case(
        "sglang", "mixtral-8x7b", MIXTRAL, "H200", H200_MEMORY, "bf16", 2, 2,
        "static", 0.83, 1.5, 8192, 2048, "fp16", 2,
    ),
]  # fmt: skip


def deployed(case: Case, **kwargs: object) -> Deployment:
    c = load_catalog()
    return deploy(
        case.engine,
        c.gpus.get(case.gpu),
        c.models.get(case.model),
        c.precisions.get(case.precision),
        case.tp,
        **kwargs,  # type: ignore[arg-type]
    )


def test_shapes_match_the_catalog() -> None:
    c = load_catalog()
    for name, shape in (
        ("llama-3.1-8b", LLAMA31_8B),
        ("llama-3.1-70b", LLAMA31_70B),
        ("mixtral-8x7b", MIXTRAL),
    ):
        model = c.models.get(name)
        assert model.linear_params == shape.linear, name
        assert model.embedding_params == shape.embeddings, name
    # with the 32 x 2 + 1 RMSNorm weight vectors of 4096: 8,030,261,248 parameters, Llama 3.1
    # 8B's published size
    assert LLAMA31_8B.linear + LLAMA31_8B.embeddings + 65 * 4096 == 8_030_261_248
    assert c.gpus.get("H100-SXM").memory_bytes == H100_MEMORY
    assert c.gpus.get("H200").memory_bytes == H200_MEMORY


def test_engine_rows_are_what_the_hand_figures_assume() -> None:
    for case in CASES:
        e = get_engine(case.engine)
        assert (e.memory_rule, e.memory_fraction) == (case.rule, case.fraction)
        assert (e.max_batched_tokens, e.max_seqs) == (case.max_tokens, case.max_seqs)
        assert e.runtime_reserve_gib == case.runtime_gib
        assert e.logits_bytes == 4


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.engine}-{c.model}")
def test_memory_by_hand(case: Case) -> None:
    d = deployed(case)
    assert d.memory_rule == case.rule
    assert d.kv_cache == case.kv_cache
    assert d.weight_bytes_per_gpu == pytest.approx(case.weights(), rel=1e-12)
    assert d.activation_reserve_bytes == pytest.approx(case.activations(), rel=1e-12)
    assert d.kv_bytes_per_token == case.kv_bytes_per_token()
    assert d.kv_cache_bytes == pytest.approx(case.kv(), rel=1e-9)
    tokens = int(case.kv() // case.kv_bytes_per_token())
    assert d.kv_capacity_tokens == tokens
    shown = describe(LatencyModel(d, Profile("p")))
    assert shown["rule"] == case.rule
    assert shown["kv_cache"] == case.kv_cache
    assert shown["device_gib"] == pytest.approx(case.memory / GIB, rel=1e-12)
    assert shown["utilization"] == case.fraction
    assert shown["usable_gib"] == pytest.approx(case.memory * case.fraction / GIB)
    assert shown["weights_gib"] == pytest.approx(case.weights() / GIB, rel=1e-12)
    assert shown["activations_gib"] == pytest.approx(case.activations() / GIB, rel=1e-12)
    assert shown["kv_cache_gib"] == pytest.approx(case.kv() / GIB, rel=1e-9)
    assert shown["kv_bytes_per_token_per_gpu"] == case.kv_bytes_per_token()
    assert shown["kv_cache_tokens"] == tokens


def test_memory_hand_figures_in_round_numbers() -> None:
    # a sanity check of the hand arithmetic itself, in GiB
    vllm, trt, sgl = CASES
    # Llama 3.1 8B, bf16: 16,059,990,016 B = 14.96 GiB of weights; 268,435,456 (0.25 GiB) +
    # 8192 x 90,112 + 1024 x 128,256 x 4 = 1,531,969,536 B of activations; KV cache
    # 76,968,728,985.6 - 16,059,990,016 - 1,531,969,536 = 59,376,769,433.6 B, 453,008.7 tokens
    assert vllm.weights() == 16_059_990_016
    assert vllm.activations() == 1_531_969_536
    assert vllm.kv() == pytest.approx(59_376_769_433.6, abs=1e-3)
    assert vllm.kv() / GIB == pytest.approx(55.298, abs=1e-3)
    assert int(vllm.kv() // 131_072) == 453_008
    # Llama 3.1 70B, fp8, tp 2: (68,451,041,280 x 1 B + 2,101,346,304 x 2 B) / 2 =
    # 36,326,866,944 B = 33.83 GiB of weights a GPU; FP8 KV is 81,920 B a token a GPU
    assert trt.weights() == 36_326_866_944
    assert trt.kv_bytes_per_token() == 81_920
    # Mixtral 8x7B on 2 x H200 under SGLang: (46,440,382,464 + 262,144,000) x 2 B / 2 =
    # 46,702,526,464 B = 43.50 GiB of weights; KV 141 x 0.83 - 43.50 GiB, activations outside
    assert sgl.weights() == 46_702_526_464
    assert sgl.kv() / GIB == pytest.approx(141 * 0.83 - 43.495, abs=1e-3)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.engine}-{c.model}")
def test_the_three_memory_rules_on_one_deployment(case: Case) -> None:
    d = deployed(case)
    w, a, m = d.weight_bytes_per_gpu, d.activation_reserve_bytes, d.gpu.memory_bytes
    u = d.memory_utilization
    total = dataclasses.replace(d, memory_rule="total").kv_cache_bytes
    free = dataclasses.replace(d, memory_rule="free").kv_cache_bytes
    static = dataclasses.replace(d, memory_rule="static").kv_cache_bytes
    assert total == pytest.approx(u * m - w - a, rel=1e-12)
    assert free == pytest.approx(u * (m - w - a), rel=1e-12)
    assert static == pytest.approx(u * m - w, rel=1e-12)
    # free gives back the (1 - u) share of weights and activations; static leaves the
    # activations outside the fraction
    assert free - total == pytest.approx((1 - u) * (w + a), rel=1e-9)
    assert static - total == pytest.approx(a, rel=1e-9)
    with pytest.raises(UnsupportedError, match="memory rule must be total, free or static"):
        dataclasses.replace(d, memory_rule="half")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.engine}-{c.model}")
def test_memory_utilization_moves_kv_capacity_by_the_expected_bytes(case: Case) -> None:
    low = deployed(case, memory_utilization=case.fraction - 0.05)
    high = deployed(case, memory_utilization=case.fraction)
    m, w, a = (
        H100_MEMORY if case.gpu == "H100-SXM" else H200_MEMORY,
        case.weights(),
        case.activations(),
    )
    # --gpu-memory-utilization (vLLM), --free-gpu-memory-fraction (TensorRT-LLM),
    # --mem-fraction-static (SGLang): 0.05 more of the device, or of what is free
    expected = {"total": 0.05 * m, "free": 0.05 * (m - w - a), "static": 0.05 * m}[case.rule]
    assert high.kv_cache_bytes - low.kv_cache_bytes == pytest.approx(expected, rel=1e-9)
    moved = high.kv_capacity_tokens - low.kv_capacity_tokens
    assert moved == pytest.approx(expected / case.kv_bytes_per_token(), abs=1)
    # weights and activations do not move
    assert low.weight_bytes_per_gpu == high.weight_bytes_per_gpu
    assert low.activation_reserve_bytes == high.activation_reserve_bytes


def test_an_explicit_batch_budget_changes_the_activation_reserve_by_hand() -> None:
    vllm = CASES[0]
    # vLLM's defaults for A100-class GPUs (engines.csv notes): 2048 tokens, 256 sequences
    small = deployed(vllm, max_batched_tokens=2048, max_seqs=256)
    assert (small.max_batched_tokens, small.max_seqs) == (2048, 256)
    per_token = (4 * 4096 + 2 * 14336) * 2
    expected = 0.25 * GIB + 2048 * per_token + 256 * 128256 * 4
    assert small.activation_reserve_bytes == pytest.approx(expected, rel=1e-12)
    big = deployed(vllm)
    assert big.kv_cache_bytes - small.kv_cache_bytes == pytest.approx(
        -(6144 * per_token + 768 * 128256 * 4), rel=1e-9
    )


# --- KV-cache precision defaults -------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "gpu", "precision", "kv"),
    [
        ("trtllm", "H100-SXM", "fp8", "fp8"),  # FP8 checkpoints carry an FP8 KV cache
        ("trtllm", "B200", "fp4", "fp8"),  # NVFP4 checkpoints too
        ("trtllm", "H100-SXM", "bf16", "fp16"),
        ("trtllm", "H100-SXM", "int8", "fp16"),
        ("trtllm", "A100-80GB", "int4-awq", "fp16"),  # no FP8 units
        ("vllm", "H100-SXM", "fp8", "fp16"),  # kv_cache_dtype auto: the model's 16-bit dtype
        ("sglang", "H100-SXM", "fp8", "fp16"),
        ("vllm", "H100-SXM", "bf16", "fp16"),
    ],
)
def test_engine_kv_cache_default(engine: str, gpu: str, precision: str, kv: str) -> None:
    c = load_catalog()
    d = deploy(engine, c.gpus.get(gpu), c.models.get("llama-3.1-8b"), c.precisions.get(precision))
    assert d.kv_cache == kv
    assert d.kv_bytes == {"fp8": 1.0, "fp16": 2.0}[kv]
    assert get_engine(engine).default_kv_cache(c.precisions.get(precision), c.gpus.get(gpu)) == kv


def test_an_explicit_kv_cache_overrides_the_engine_default() -> None:
    c = load_catalog()
    args = (c.gpus.get("H100-SXM"), c.models.get("llama-3.1-8b"), c.precisions.get("fp8"))
    assert deploy("trtllm", *args, kv_cache="fp16").kv_cache == "fp16"
    assert deploy("trtllm", *args, kv_cache="BF16").kv_bytes == 2.0
    assert deploy("vllm", *args, kv_cache="fp8").kv_cache == "fp8"
    # half the KV bytes a token: twice the tokens in (about) the same KV memory
    fp16, fp8 = deploy("vllm", *args), deploy("vllm", *args, kv_cache="fp8")
    assert fp8.kv_cache_bytes == fp16.kv_cache_bytes
    assert fp8.kv_capacity_tokens == pytest.approx(2 * fp16.kv_capacity_tokens, abs=1)


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
def test_an_fp8_kv_cache_on_a100_is_refused(engine: str) -> None:
    c = load_catalog()
    with pytest.raises(
        UnsupportedError, match="an FP8 KV cache needs FP8 support, which A100-80GB lacks"
    ) as info:
        deploy(
            engine,
            c.gpus.get("A100-80GB"),
            c.models.get("llama-3.1-8b"),
            c.precisions.get("bf16"),
            kv_cache="fp8",
        )
    assert isinstance(info.value, UsageError)


# --- names and errors ------------------------------------------------------------------------


def test_engine_names_and_aliases() -> None:
    assert engine_names() == ["sglang", "torch", "trtllm", "vllm"]
    assert get_engine("pytorch").name == "torch"
    assert get_engine("TensorRT-LLM").name == "trtllm"
    assert get_engine(" NIM ").name == "trtllm"
    assert get_engine("vllm-rocm").name == "vllm"


def test_an_unknown_engine_or_kv_cache_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown engine 'vlm'; known engines:.*vllm"):
        get_engine("vlm")
    with pytest.raises(UsageError) as info:
        get_engine("\x1b[2J" + "x" * 5000)
    assert "\x1b" not in str(info.value) and len(str(info.value)) < 400
    with pytest.raises(UsageError, match="unknown KV-cache precision .int4.; expected fp32, fp16"):
        kv_cache_bytes("int4")


def test_a_model_that_does_not_fit_says_so_in_gib() -> None:
    c = load_catalog()
    d = deploy(
        "vllm", c.gpus.get("H100-SXM"), c.models.get("llama-3.1-70b"), c.precisions.get("bf16")
    )
    need = (d.weight_bytes_per_gpu + d.activation_reserve_bytes) / GIB
    with pytest.raises(DoesNotFitError, match=f"it needs {need:.1f} GiB per GPU") as info:
        _ = d.kv_capacity_tokens
    assert "each GPU has 71.7 GiB (79.6 GiB x 0.9 utilization)" in str(info.value)


@pytest.mark.parametrize(
    ("engine", "gpu", "expected"),
    [
        ("vllm", "H100-SXM", (8192, 1024)),
        ("vllm", "H200", (8192, 1024)),
        ("vllm", "A100-80GB", (2048, 256)),  # every A100, whatever its memory
        ("vllm", "L4", (2048, 256)),  # under 70 GiB
        ("trtllm", "L4", (8192, 2048)),  # TensorRT-LLM's defaults do not depend on the GPU
    ],
)
def test_batch_defaults_follow_the_engines_gpu_rule(
    engine: str, gpu: str, expected: tuple[int, int]
) -> None:
    catalog = load_catalog()
    spec = get_engine(engine)
    assert spec.batch_defaults(catalog.gpus.get(gpu)) == expected
    deployment = deploy(
        spec,
        catalog.gpus.get(gpu),
        catalog.models.get("llama-3.1-8b"),
        catalog.precisions.get("bf16"),
    )
    assert (deployment.max_batched_tokens, deployment.max_seqs) == expected
    # an explicit value wins
    explicit = deploy(
        spec,
        catalog.gpus.get(gpu),
        catalog.models.get("llama-3.1-8b"),
        catalog.precisions.get("bf16"),
        max_batched_tokens=4096,
        max_seqs=64,
    )
    assert (explicit.max_batched_tokens, explicit.max_seqs) == (4096, 64)
