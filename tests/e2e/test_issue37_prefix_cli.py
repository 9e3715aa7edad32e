"""``planner ingest --prefix-block-tokens N``: a log states the tokens each of its prefix block
ids stands for; the dataset keeps it and ``planner simulate`` counts the cache hits with it (a
700-token shared system prompt hashed at 16-token blocks: 688 tokens reused, whole 16-token KV
blocks), where before every id was taken as 512 tokens."""

from __future__ import annotations

import json
from pathlib import Path

from planner.cli.options import INGEST_PREFIX_BLOCK_TOKENS
from planner.ingest.pipeline import DEFAULT_PREFIX_BLOCK_TOKENS
from tests.e2e.test_cli import run

SYSTEM, USER = 700, 300


def _log(tmp_path: Path) -> Path:
    """Two requests 10 s apart whose prompts share a 700-token system prompt, with block ids as
    a gateway hashing 16-token blocks writes them."""
    count = -(-(SYSTEM + USER) // 16)
    shared = SYSTEM // 16
    first = list(range(count))
    second = first[:shared] + list(range(1000, 1000 + count - shared))
    path = tmp_path / "gateway.csv"
    lines = ["timestamp,prompt_tokens,completion_tokens,blocks"]
    for second_s, blocks in ((0, first), (10, second)):
        ids = " ".join(map(str, blocks))
        lines.append(f'2025-01-06T00:00:{second_s:02d}Z,{SYSTEM + USER},1,"{ids}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


MAP = ["--map", "arrival=timestamp", "--map", "input_tokens=prompt_tokens"]
MAP += ["--map", "output_tokens=completion_tokens", "--map", "prefix_block_ids=blocks"]
SIM = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--engine", "vllm", "--json", "-q"]


def _cached(home: Path, dataset: str) -> int:
    result = run(home, "simulate", "--dataset", dataset, *SIM)
    assert result.returncode == 0, result.stderr
    cached: int = json.loads(result.stdout)["summary"]["all"]["cached_tokens"]
    return cached


def test_the_logs_block_size_reaches_the_simulator(tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = _log(tmp_path)
    stated = run(home, "ingest", str(log), *MAP, "--name", "fine", "--prefix-block-tokens", "16")
    assert stated.returncode == 0, stated.stderr
    assert _cached(home, "fine") == 688  # 43 whole 16-token blocks of the 700 shared
    # the same ids taken as 512-token blocks (the default): 43 "blocks" of 512 tokens, so the
    # second prompt counts as cached whole (all but its last token)
    again = run(home, "ingest", str(log), *MAP, "--name", "coarse", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == "already-present"
    assert "takes each prefix block id as 16 tokens, not the 512 asked now" in again.stdout
    copy = tmp_path / "copy.csv"  # the same requests in another file: a dataset of its own
    copy.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    default = run(home, "ingest", str(copy), *MAP, "--name", "coarse")
    assert default.returncode == 0, default.stderr
    assert _cached(home, "coarse") == SYSTEM + USER - 1


def test_a_bad_block_size_is_refused_before_reading(tmp_path: Path) -> None:
    result = run(
        tmp_path / "home", "ingest", str(_log(tmp_path)), *MAP, "--prefix-block-tokens", "0"
    )
    assert result.returncode != 0
    assert "--prefix-block-tokens '0': expected the tokens each prefix block id stands for" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_the_cli_default_is_the_librarys() -> None:
    assert INGEST_PREFIX_BLOCK_TOKENS == DEFAULT_PREFIX_BLOCK_TOKENS
