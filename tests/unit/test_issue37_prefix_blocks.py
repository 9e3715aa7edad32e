"""Issue 37: prefix ids were taken only as 512-token blocks, so a shared system prompt of
another size under-counted its cache hits. A log states its block size at ingest
(``--prefix-block-tokens``, kept with the dataset, 512 by default for Mooncake's hash_ids), the
replayed workload carries it, and the simulator counts a matched prefix in the engine's own
16-token KV blocks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.errors import UsageError
from planner.ingest.options import ingest_options
from planner.ingest.pipeline import DEFAULT_PREFIX_BLOCK_TOKENS, IngestOptions
from planner.simulate.engine import BLOCK_TOKENS, EngineConfig
from planner.simulate.workload import (
    MOONCAKE_BLOCK_TOKENS,
    Workload,
    limit_prompts,
    prefix_block_tokens_of,
)
from tests.unit.test_sim_engine import LINEAR, serve, workload

SYSTEM = 700  # a shared system prompt: not a multiple of 512 (nor of 16)
USER = 300  # each request's own question after it


def _shared_system_prompt(block_tokens: int) -> Workload:
    """Two requests whose prompts share the first ``SYSTEM`` tokens, with block ids as a log
    hashed at ``block_tokens`` tokens gives them: the blocks wholly inside the system prompt
    are the same, every later block (the one straddling it too) differs."""
    inputs = SYSTEM + USER
    count = -(-inputs // block_tokens)
    shared = SYSTEM // block_tokens
    first = tuple(range(count))
    second = (*first[:shared], *range(1000, 1000 + count - shared))
    w = workload([0.0, 10.0], [inputs, inputs], [1, 1], blocks=[first, second])
    return replace(w, prefix_block_tokens=block_tokens)


def test_a_log_hashed_at_16_tokens_counts_the_shared_system_prompt() -> None:
    engine = EngineConfig(prefix_cache_tokens=1_000_000)
    fine = serve(_shared_system_prompt(16), LINEAR, engine)
    coarse = serve(_shared_system_prompt(512), LINEAR, engine)
    # 700 shared tokens: 43 whole 16-token KV blocks (688 tokens) are reused, as an engine
    # with 16-token blocks reuses them; as 512-token blocks only one block's worth (512)
    assert fine["cached_tokens"].tolist() == [0, 688]
    assert coarse["cached_tokens"].tolist() == [0, 512]
    assert SYSTEM - SYSTEM % BLOCK_TOKENS == 688


def test_a_block_size_that_is_not_a_multiple_of_16_counts_whole_kv_blocks() -> None:
    # 100-token blocks: 7 shared (700 tokens) -> 43 whole KV blocks of 16 tokens, 688 tokens
    out = serve(_shared_system_prompt(100), LINEAR, EngineConfig(prefix_cache_tokens=1_000_000))
    assert out["cached_tokens"].tolist() == [0, 688]


def test_a_whole_prompt_match_still_computes_its_last_token() -> None:
    # the same 1000-token prompt twice, hashed at 16 tokens (the last block partly used): all
    # of it cached but the last token, as before the change
    blocks = tuple(range(-(-1000 // 16)))
    w = replace(
        workload([0.0, 10.0], [1000, 1000], [1, 1], blocks=[blocks, blocks]),
        prefix_block_tokens=16,
    )
    out = serve(w, LINEAR, EngineConfig(prefix_cache_tokens=1_000_000))
    assert out["cached_tokens"].tolist() == [0, 999]


def test_the_block_size_survives_a_longest_prompt_cut() -> None:
    w = _shared_system_prompt(16)
    cut = limit_prompts(w, 500).kept
    assert cut.prefix_block_tokens == 16
    assert cut.prefix_blocks is not None
    assert [len(b) for b in cut.prefix_blocks] == [500 // 16, 500 // 16]


def test_the_ingest_option_is_checked_and_recorded() -> None:
    assert DEFAULT_PREFIX_BLOCK_TOKENS == MOONCAKE_BLOCK_TOKENS == 512
    assert IngestOptions().prefix_block_tokens == 512
    assert ingest_options(prefix_block_tokens=16).prefix_block_tokens == 16
    for bad in (0, -16, 1 << 21):
        with pytest.raises(UsageError, match=r"--prefix-block-tokens .*whole number from 1"):
            ingest_options(prefix_block_tokens=bad)
    with pytest.raises(UsageError, match="Block size"):
        ingest_options(prefix_block_tokens=0, names={"prefix_block_tokens": "Block size"})


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"prefix_block_tokens": 16}, 16),
        ({}, 512),  # a dataset ingested before the option: Mooncake's 512
        (None, 512),
        ({"prefix_block_tokens": "16"}, 512),
        ({"prefix_block_tokens": 0}, 512),
        ({"prefix_block_tokens": True}, 512),
    ],
)
def test_a_datasets_block_size(options: dict[str, object] | None, expected: int) -> None:
    assert prefix_block_tokens_of(options) == expected


def test_the_workload_keeps_its_block_size_when_scaled_or_cut() -> None:
    w = _shared_system_prompt(16)
    assert w.scaled(2.0, seed=1).prefix_block_tokens == 16
    assert w.window(0.0, 5.0).prefix_block_tokens == 16
    assert w.head(1).prefix_block_tokens == 16
    assert np.array_equal(w.head(1).input_tokens, [SYSTEM + USER])
