"""Mapping a request log's model names to catalog models (planner.workload.model_names)."""

from __future__ import annotations

import pytest

from planner.errors import UsageError
from planner.latency.catalog import load_catalog
from planner.workload.model_names import (
    catalog_model_of,
    parse_model_map,
    resolve_models,
)


@pytest.mark.parametrize(
    ("log_name", "catalog"),
    [
        # the catalog's names and aliases, any case
        ("llama-3.1-8b", "llama-3.1-8b"),
        ("LLAMA-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        # normalised forms: org prefix, Meta- prefix, tuning and quantisation suffixes
        ("some-org/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "llama-3.1-70b"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"),
        ("Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4", "qwen2.5-32b"),
        ("Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b"),
        ("TheBloke/Llama-2-13B-chat-hf", "llama-2-13b"),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b"),
        # Ollama tags
        ("llama3.1:8b", "llama-3.1-8b"),
        ("llama3.1:70b-instruct-q4_K_M", "llama-3.1-70b"),
        ("qwen2.5:7b", "qwen2.5-7b"),
        ("mixtral:8x7b", "mixtral-8x7b"),
        # not the catalog's
        ("gpt-4o", None),
        ("mistral:latest", None),  # no size: which Mistral is not known
        ("llama3.1:405b-instruct-fp16", "llama-3.1-405b"),
        ("", None),
    ],
)
def test_log_names_resolve_to_catalog_models(log_name: str, catalog: str | None) -> None:
    assert catalog_model_of(log_name) == catalog
    if catalog is not None:
        assert catalog in load_catalog().models.names()


def test_the_model_map_comes_first_and_takes_aliases() -> None:
    mapping = parse_model_map(["gpt-4o=Llama-3.1-70B,my-8b=llama-3.1-8b", "llama3.1:8b=qwen2.5-7b"])
    assert mapping == {
        "gpt-4o": "llama-3.1-70b",
        "my-8b": "llama-3.1-8b",
        "llama3.1:8b": "qwen2.5-7b",
    }
    resolution = resolve_models(
        {"gpt-4o": 10, "llama3.1:8b": 5, "meta-llama/Llama-3.1-8B-Instruct": 20},
        model_map=mapping,
    )
    # the map beats the name's own match (llama3.1:8b would be llama-3.1-8b)
    assert resolution.catalog_of == {
        "gpt-4o": "llama-3.1-70b",
        "llama3.1:8b": "qwen2.5-7b",
        "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    }
    assert resolution.models() == ["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b"]
    assert resolution.requests_of("Llama-3.1-8B") == 20  # an alias
    assert resolution.total == 35 and resolution.skipped_note() is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gpt-4o", "expected LOGNAME=CATALOG"),
        ("=llama-3.1-8b", "expected LOGNAME=CATALOG"),
        ("gpt-4o=", "expected LOGNAME=CATALOG"),
        ("gpt-4o=gpt-5", "'gpt-5' is not a catalog model"),
    ],
)
def test_a_bad_model_map_item_names_option_and_item(value: str, expected: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_model_map([value], "--model-map")
    assert str(error.value).startswith(f"--model-map {value!r}: ")
    assert expected in str(error.value)


def test_a_log_name_mapped_twice_differently_is_refused() -> None:
    with pytest.raises(UsageError, match="already mapped to llama-3.1-8b"):
        parse_model_map(["a=llama-3.1-8b", "a=llama-3.1-70b"])


def test_unmapped_names_are_an_error_listing_each_with_its_share() -> None:
    counts: dict[str | None, int] = {"meta-llama/Llama-3.1-8B-Instruct": 900, "gpt-4o": 60}
    counts.update({f"custom-{i}": 3 for i in range(12)})
    counts["evil\x1b[31m"] = 4
    with pytest.raises(UsageError) as error:
        resolve_models(counts, source="dataset 'multi'")
    message = str(error.value)
    assert message.startswith("dataset 'multi': 14 model names are not in the catalog: ")
    total = sum(counts.values())
    assert f"'gpt-4o' (60 requests, {60 / total:.1%})" in message
    assert message.index("'gpt-4o'") < message.index("'evil") < message.index("'custom-0'")
    assert "and 4 more" in message  # 10 listed of 14
    assert "\x1b" not in message and "'evil\\x1b[31m'" in message
    left = total - 900
    assert "--model-map LOGNAME=CATALOG" in message
    assert f"leave their {left:,} requests ({left / total:.1%} of {total:,}) out" in message
    assert "--unmapped skip" in message


def test_skip_leaves_unmapped_names_out_and_states_the_share() -> None:
    resolution = resolve_models(
        {"meta-llama/Llama-3.1-8B-Instruct": 750, "foo": 200, "bar": 50},
        unmapped="skip",
        source="dataset 'multi'",
    )
    assert resolution.catalog_of == {"meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b"}
    assert resolution.skipped == {"foo": 200, "bar": 50}
    assert resolution.skipped_requests == 250 and resolution.skipped_share == 0.25
    assert resolution.skipped_note() == (
        "left out 250 requests (25.0%) of models not in the catalog: 'foo' (200), 'bar' (50)"
    )
    with pytest.raises(UsageError, match="--unmapped 'ignore': expected error or skip"):
        resolve_models({"foo": 1}, unmapped="ignore")


def test_requests_without_a_model_are_the_default_models_only_in_a_log_of_none() -> None:
    alone = resolve_models({None: 40, "": 2}, default="Llama-3.1-8B")
    assert alone.catalog_of == {None: "llama-3.1-8b"} and alone.counts == {None: 42}
    assert alone.log_names("llama-3.1-8b") == [None]
    with pytest.raises(UsageError, match="the log names no model: give the model"):
        resolve_models({None: 40})
    mixed = {None: 10, "meta-llama/Llama-3.1-70B-Instruct": 30}
    with pytest.raises(UsageError, match=r"\(no model\) \(10 requests, 25.0%\)"):
        resolve_models(mixed, default="llama-3.1-8b")
    skipped = resolve_models(mixed, default="llama-3.1-8b", unmapped="skip")
    assert skipped.skipped == {None: 10} and skipped.models() == ["llama-3.1-70b"]


def test_only_restricts_to_one_model_or_says_which_the_log_has() -> None:
    resolution = resolve_models(
        {
            "meta-llama/Llama-3.1-8B-Instruct": 300,
            "llama3.1:8b": 60,
            "meta-llama/Llama-3.1-70B-Instruct": 120,
        },
        source="dataset 'multi'",
    )
    only = resolution.only("Llama-3.1-8B")
    assert only.models() == ["llama-3.1-8b"]
    assert only.log_names("llama-3.1-8b") == ["meta-llama/Llama-3.1-8B-Instruct", "llama3.1:8b"]
    assert only.total == 360 and resolution.total == 480
    with pytest.raises(UsageError) as error:
        resolution.only("qwen2.5-7b")
    message = str(error.value)
    assert message.startswith("dataset 'multi' has no requests of model 'qwen2.5-7b'; its models:")
    assert "llama-3.1-8b 75.0%" in message and "llama-3.1-70b 25.0%" in message
    assert message.index("llama-3.1-8b 75.0%") < message.index("llama-3.1-70b 25.0%")


def test_forecast_model_takes_the_log_name_or_a_catalog_model() -> None:
    import pandas as pd

    from planner.errors import NotFoundError
    from planner.forecast.series import HOUR_US, series_from_hours

    b8, b70 = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"
    table = pd.DataFrame(
        {
            "hour": [0, 0, 0, 1, 1, 1],
            "model": [b8, b70, "llama3.1:8b", b8, b70, "llama3.1:8b"],
            "requests": [30.0, 10.0, 5.0, 60.0, 20.0, 7.0],
            "input_tokens": [1.0] * 6,
            "output_tokens": [1.0] * 6,
        }
    )

    def hourly(model: str) -> list[float]:
        series = series_from_hours("multi", table, 0, 2 * HOUR_US - 1, model=model)
        return [float(y) for y in series.frame["y"]]

    assert hourly(b70) == [10.0, 20.0] == hourly("llama-3.1-70b")
    assert hourly("Llama-3.1-8B") == [35.0, 67.0]  # both names of the 8B
    assert hourly("llama3.1:8b") == [5.0, 7.0]  # the exact log name: that name only
    with pytest.raises(NotFoundError, match="has no model 'qwen2.5-7b'"):
        hourly("qwen2.5-7b")
