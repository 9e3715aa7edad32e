from __future__ import annotations

import pytest

from planner.errors import UsageError
from planner.ingest.formats import (
    AZURE_LLM,
    BURSTGPT,
    MOONCAKE,
    TimeKind,
    TimeSpec,
    TimeUnit,
    builtin_format,
    detect_format,
    generic_format,
    parse_mapping,
)


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        (["TIMESTAMP", "ContextTokens", "GeneratedTokens"], AZURE_LLM),
        (["timestamp", "input_length", "output_length", "hash_ids"], MOONCAKE),
        (["timestamp", "input_length", "output_length"], MOONCAKE),
        (
            ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"],
            BURSTGPT,
        ),
    ],
)
def test_detects_builtin_formats_from_header(columns: list[str], expected: object) -> None:
    assert detect_format(columns) is expected


def test_unknown_header_is_not_guessed() -> None:
    assert detect_format(["ts", "prompt", "completion"]) is None


def test_unknown_format_name_lists_known_names_closest_first() -> None:
    with pytest.raises(UsageError) as err:
        builtin_format("azure")
    message = str(err.value)
    assert "unknown format 'azure'" in message
    assert message.index("azure-llm") < message.index("mooncake")


def test_generic_format_requires_the_three_core_fields() -> None:
    with pytest.raises(UsageError, match=r"missing: --map output_tokens=COLUMN"):
        generic_format({"arrival": "ts", "input_tokens": "in"}, TimeSpec())


def test_generic_format_rejects_unknown_fields() -> None:
    with pytest.raises(UsageError, match=r"unknown field 'latency'"):
        generic_format(
            {"arrival": "a", "input_tokens": "b", "output_tokens": "c", "latency": "d"}, TimeSpec()
        )


def test_parse_mapping() -> None:
    assert parse_mapping(["arrival=ts", " input_tokens = prompt "]) == {
        "arrival": "ts",
        "input_tokens": "prompt",
    }
    with pytest.raises(UsageError, match="expected FIELD=COLUMN"):
        parse_mapping(["arrival"])
    with pytest.raises(UsageError, match="mapped twice"):
        parse_mapping(["arrival=a", "arrival=b"])


def test_time_expectations_read_well() -> None:
    assert "ISO 8601" in TimeSpec().expected()
    relative = TimeSpec(TimeKind.RELATIVE, TimeUnit.MS).expected()
    assert relative == "a number of ms since the start time"


def test_optional_columns_resolve_only_when_present() -> None:
    assert "prefix_block_ids" not in MOONCAKE.resolve(
        ["timestamp", "input_length", "output_length"]
    )
    assert (
        MOONCAKE.resolve(["timestamp", "input_length", "output_length", "hash_ids"])[
            "prefix_block_ids"
        ]
        == "hash_ids"
    )
