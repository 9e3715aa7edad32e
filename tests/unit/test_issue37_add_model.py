"""Issue 37: a model outside the catalog is added from its Hugging Face config.json
(``planner catalog add-model``) into ``$PLANNER_HOME/catalog/models.csv``, which the catalog
loader merges over the bundled models; every field is checked, the read is bounded and the
write atomic and never through a link."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planner.errors import PlannerError, UsageError
from planner.latency.catalog import (
    HF_CONFIG_MAX_BYTES,
    CatalogError,
    ModelConfigError,
    load_catalog,
    user_models_path,
)
from planner.latency.engines import deploy
from planner.latency.model import memory_summary
from planner.usecases.catalog import add_model

# CodeLlama-34B's config.json (codellama/CodeLlama-34b-hf): a Llama-2-34B shape
CODELLAMA_34B: dict[str, Any] = {
    "_name_or_path": "codellama/CodeLlama-34b-hf",
    "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 8192,
    "initializer_range": 0.02,
    "intermediate_size": 22016,
    "max_position_embeddings": 16384,
    "model_type": "llama",
    "num_attention_heads": 64,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.32.0.dev0",
    "use_cache": True,
    "vocab_size": 32000,
}
MIXTRAL = {
    **CODELLAMA_34B,
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 32768,
}


def write(tmp_path: Path, config: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_codellama_34b_is_added_and_known_everywhere(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown model 'codellama-34b'"):
        load_catalog().models.get("codellama-34b")
    added = add_model(
        write(tmp_path, CODELLAMA_34B),
        "codellama-34b",
        ["CodeLlama-34B", "codellama/CodeLlama-34b-hf"],
    )
    assert added.replaced is None and added.path == user_models_path()
    m = load_catalog().models.get("codellama/CodeLlama-34b-hf")
    assert (m.name, m.layers, m.hidden_size, m.attention_heads, m.kv_heads) == (
        "codellama-34b",
        48,
        8192,
        64,
        8,
    )
    assert (m.head_dim, m.intermediate_size, m.vocab_size, m.max_context) == (
        128,
        22016,
        32000,
        16384,
    )
    assert not m.is_moe and not m.tied_embeddings and m.family == "llama"
    assert 33.5e9 < m.total_params < 34e9  # a 34B model
    assert "sha256" in m.source and "config.json" in m.source
    # the bundled models are all still there
    assert load_catalog().models.get("llama-2-70b").layers == 80
    c = load_catalog()
    deployment = deploy("vllm", c.gpus.get("H100-SXM"), m, c.precisions.get("bf16"), 2)
    assert memory_summary(deployment)["weights_gib"] > 30  # 68 GB over two GPUs


def test_the_default_name_and_a_second_add_replaces_the_first(tmp_path: Path) -> None:
    config = write(tmp_path, CODELLAMA_34B)
    assert add_model(config).model.name == "codellama-34b-hf"  # from _name_or_path
    again = add_model(config, "codellama-34b-hf", ["cl34"])
    assert again.replaced == "user"
    assert len(user_models_path().read_text(encoding="utf-8").splitlines()) == 2  # header + 1
    assert load_catalog().models.get("cl34").name == "codellama-34b-hf"


def test_a_mixtral_config_is_a_mixture_of_experts(tmp_path: Path) -> None:
    m = add_model(write(tmp_path, MIXTRAL), "my-mixtral").model
    bundled = load_catalog().models.get("mixtral-8x7b")
    assert (m.experts, m.experts_per_token) == (8, 2)
    assert m.total_params == bundled.total_params and m.active_params == bundled.active_params


def test_a_user_model_is_read_from_its_own_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_model(write(tmp_path, CODELLAMA_34B), "codellama-34b")
    monkeypatch.setenv("PLANNER_HOME", str(tmp_path / "elsewhere"))
    with pytest.raises(UsageError, match="unknown model"):
        load_catalog().models.get("codellama-34b")


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in CODELLAMA_34B.items() if k != key}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_without("num_hidden_layers"), "num_hidden_layers is missing: expected a whole number"),
        ({**CODELLAMA_34B, "hidden_size": "8192"}, "hidden_size = '8192': expected a whole number"),
        ({**CODELLAMA_34B, "vocab_size": True}, "vocab_size = 'True': expected a whole number"),
        ({**CODELLAMA_34B, "intermediate_size": 8.5}, "intermediate_size = '8.5'"),
        (
            {**CODELLAMA_34B, "num_hidden_layers": 0},
            "num_hidden_layers = 0: expected a whole number from 1",
        ),
        ({**CODELLAMA_34B, "hidden_size": 10**9}, "hidden_size = 1000000000"),
        ({**CODELLAMA_34B, "num_key_value_heads": 7}, "num_key_value_heads = 7 must divide"),
        (
            {**_without("num_key_value_heads"), "num_attention_heads": 63},
            "not a multiple of num_attention_heads",
        ),
        (
            {**CODELLAMA_34B, "architectures": ["GPT2LMHeadModel"]},
            "architectures = 'GPT2LMHeadModel'",
        ),
        (_without("architectures"), "architectures: expected a list"),
        (
            {**CODELLAMA_34B, "tie_word_embeddings": "no"},
            "tie_word_embeddings = 'no': expected true",
        ),
        (
            {k: v for k, v in MIXTRAL.items() if k != "num_local_experts"},
            "num_local_experts is missing",
        ),
        ({**MIXTRAL, "num_experts_per_tok": 9}, "num_experts_per_tok = 9 must be from 1 to"),
        ({**CODELLAMA_34B, "num_local_experts": 8}, "a mixture of experts is MixtralForCausalLM"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_a_bad_config_names_the_file_and_the_field(
    tmp_path: Path, config: Any, message: str
) -> None:
    path = write(tmp_path, config)
    with pytest.raises(ModelConfigError) as caught:
        add_model(path, "bad")
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"--config {path}: ")
    assert not user_models_path().exists()  # nothing written


def test_files_that_are_not_a_config(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="no such file"):
        add_model(tmp_path / "missing.json", "m")
    with pytest.raises(ModelConfigError, match="not a regular file"):
        add_model(tmp_path, "m")
    broken = tmp_path / "broken.json"
    broken.write_text('{"hidden_size": 8192,', encoding="utf-8")
    with pytest.raises(ModelConfigError, match=r"not valid JSON \(line 1"):
        add_model(broken, "m")
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00" * 100)
    with pytest.raises(ModelConfigError, match="not UTF-8"):
        add_model(binary, "m")
    huge = tmp_path / "huge.json"
    huge.write_text(
        json.dumps({**CODELLAMA_34B, "pad": "x" * HF_CONFIG_MAX_BYTES}), encoding="utf-8"
    )
    with pytest.raises(ModelConfigError, match="larger than 1 MiB"):
        add_model(huge, "m")
    with pytest.raises(ModelConfigError, match="gives no model|names no model"):
        add_model(write(tmp_path, _without("_name_or_path")))


@pytest.mark.parametrize("name", ["", "=cmd()", "a b", "x" * 65, "../etc"])
def test_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ModelConfigError, match="--name"):
        add_model(write(tmp_path, CODELLAMA_34B), name)


def test_names_must_stay_unambiguous(tmp_path: Path) -> None:
    config = write(tmp_path, CODELLAMA_34B)
    with pytest.raises(UsageError, match="'Llama-2-70B' already names the model llama-2-70b"):
        add_model(config, "codellama-34b", ["Llama-2-70B"])
    with pytest.raises(ModelConfigError, match="--aliases"):
        add_model(config, "codellama-34b", ["=HYPERLINK()"])
    # a bundled model's name: the user's entry overrides it, and says so
    assert add_model(config, "llama-2-7b").replaced == "bundled"
    assert load_catalog().models.get("llama-2-7b").layers == 48
    assert len([m for m in load_catalog().models.entries if m.name == "llama-2-7b"]) == 1


def test_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.csv"
    victim.write_text("precious\n", encoding="utf-8")
    target = user_models_path()
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    with pytest.raises(UsageError, match="symbolic link"):
        add_model(write(tmp_path, CODELLAMA_34B), "codellama-34b")
    assert victim.read_text(encoding="utf-8") == "precious\n"


def test_a_broken_user_catalog_is_an_error_and_is_not_overwritten(tmp_path: Path) -> None:
    target = user_models_path()
    target.parent.mkdir(parents=True)
    target.write_text("name,aliases\nx,y\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="missing column") as caught:
        add_model(write(tmp_path, CODELLAMA_34B), "codellama-34b")
    assert isinstance(caught.value, PlannerError)
    assert target.read_text(encoding="utf-8") == "name,aliases\nx,y\n"
