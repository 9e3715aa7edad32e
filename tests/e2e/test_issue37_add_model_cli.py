"""``planner catalog add-model --config config.json`` as a user runs it: CodeLlama-34B (a
Llama-2-34B shape, not bundled) added from its Hugging Face config, then known to ``planner
latency``; a bad config is one clear line, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_cli import run
from tests.unit.test_issue37_add_model import CODELLAMA_34B


def test_add_codellama_34b_then_predict_its_latency(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CODELLAMA_34B), encoding="utf-8")
    latency = ["latency", "--gpu", "H100", "--model", "codellama-34b", "--tp", "2", "--json"]
    before = run(home, *latency)
    assert before.returncode != 0 and "unknown model 'codellama-34b'" in before.stderr

    added = run(
        home,
        "catalog",
        "add-model",
        "--config",
        str(config),
        "--name",
        "codellama-34b",
        "--aliases",
        "CodeLlama-34B,codellama/CodeLlama-34b-hf",
        "--json",
    )
    assert added.returncode == 0, added.stderr
    data = json.loads(added.stdout)
    assert data["name"] == "codellama-34b" and data["layers"] == 48
    assert data["aliases"] == ["CodeLlama-34B", "codellama/CodeLlama-34b-hf"]
    assert data["catalog_file"] == str(home / "catalog" / "models.csv")
    assert 33.5e9 < data["total_params"] < 34e9

    after = run(home, *latency)
    assert after.returncode == 0, after.stderr
    result = json.loads(after.stdout)
    assert result["model"] == "codellama-34b" and result["ttft_ms"] > 0
    by_alias = run(home, "latency", "--gpu", "H100", "--model", "codellama/CodeLlama-34b-hf")
    assert by_alias.returncode == 0, by_alias.stderr
    listed = json.loads(run(home, "catalog", "models", "--json").stdout)
    assert "codellama-34b" in {m["name"] for m in listed} and "llama-2-70b" in {
        m["name"] for m in listed
    }
    text = run(home, "catalog", "add-model", "--config", str(config), "--name", "codellama-34b")
    assert text.returncode == 0 and "added codellama-34b (updated)" in text.stdout


def test_a_bad_config_is_one_clear_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**CODELLAMA_34B, "num_key_value_heads": "8"}), encoding="utf-8")
    result = run(home, "catalog", "add-model", "--config", str(config), "--name", "x")
    assert result.returncode != 0
    assert f"--config {config}: num_key_value_heads = '8': expected a whole number" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (home / "catalog" / "models.csv").exists()
