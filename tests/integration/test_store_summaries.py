"""Dataset aggregates computed in the database (SQLite, and PostgreSQL when configured), checked
against the same numbers computed in pandas from the dataset's requests."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from planner.common.text import duration_text
from planner.errors import UsageError
from planner.ingest import IngestOptions, ingest_file
from planner.store import Store
from planner.store.queries import delete_dataset, get_dataset
from planner.store.requests import request_frame
from planner.store.summaries import (
    arrivals_per_bucket,
    content_key,
    dataset_records,
    dataset_summary,
    model_split,
    summary_columns,
    token_counts,
)
from planner.workload.charts import BUCKET_CHOICES_S, bin_counts, choose_bucket_s, span_s
from planner.workload.summary import summarize
from tests.conftest import AZURE_CONV, AZURE_CONV_NAME, WriteFile

# Requests at 00:00:30, 00:00:45, 00:01:10 and 00:03:59: minute 00:02 has none.
GAPPY = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2024-06-01 00:00:30,100,10\n"
    "2024-06-01 00:00:45,100,20\n"
    "2024-06-01 00:01:10,300,0\n"
    "2024-06-01 00:03:59,7,40\n"
)
# BurstGPT rows: two models and one row without a model.
MODELS = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "0,ChatGPT,10,1,11,Conversation log\n"
    "1,GPT-4,20,2,22,API log\n"
    "2,ChatGPT,30,3,33,Conversation log\n"
    "3,,40,4,44,API log\n"
    "4,ChatGPT,50,5,55,Conversation log\n"
)
START = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture
def conv(store: Store) -> pd.DataFrame:
    ingest_file(store, AZURE_CONV)
    with store.session() as session:
        return request_frame(session, get_dataset(session, AZURE_CONV_NAME).id)


def test_arrivals_per_minute_match_pandas(store: Store, conv: pd.DataFrame) -> None:
    with store.session() as session:
        dataset = get_dataset(session, AZURE_CONV_NAME)
        for bucket_s in (60, 600):
            got = arrivals_per_bucket(session, dataset, bucket_s)
            times = pd.to_datetime(conv["arrival_us"], unit="us", utc=True)
            expected = times.dt.floor(f"{bucket_s}s").value_counts().sort_index()
            assert got["requests"].sum() == len(conv) == 19366
            nonzero = got[got["requests"] > 0].set_index("start")["requests"]
            pd.testing.assert_series_equal(
                nonzero, expected.rename("requests"), check_names=False, check_index_type=False
            )
            np.testing.assert_allclose(got["per_minute"], got["requests"] * 60 / bucket_s)
            # consecutive, clock-aligned buckets
            steps = got["start"].diff().dropna().unique()
            assert list(steps) == [pd.Timedelta(seconds=bucket_s)]
            assert (got["start"].dt.second == 0).all()


def test_empty_minutes_are_zero_and_buckets_clock_aligned(store: Store, write: WriteFile) -> None:
    ingest_file(store, write("gappy.csv", GAPPY))
    with store.session() as session:
        got = arrivals_per_bucket(session, get_dataset(session, "gappy"), 60)
    assert list(got["start"].dt.strftime("%H:%M")) == ["00:00", "00:01", "00:02", "00:03"]
    assert list(got["requests"]) == [2, 1, 0, 1]
    assert str(got["start"].dt.tz) == "UTC"


def test_bucket_must_be_whole_seconds(store: Store, write: WriteFile) -> None:
    ingest_file(store, write("gappy.csv", GAPPY))
    with store.session() as session, pytest.raises(UsageError, match="whole positive"):
        arrivals_per_bucket(session, get_dataset(session, "gappy"), 0)


def test_token_counts_match_value_counts(store: Store, conv: pd.DataFrame) -> None:
    with store.session() as session:
        dataset = get_dataset(session, AZURE_CONV_NAME)
        for column in ("input_tokens", "output_tokens"):
            got = token_counts(session, dataset, column)
            expected = conv[column].value_counts().sort_index()
            assert list(got["tokens"]) == list(expected.index)
            assert list(got["requests"]) == list(expected)
        with pytest.raises(UsageError, match="token column"):
            token_counts(session, dataset, "arrival_us")  # type: ignore[arg-type]


def test_histograms_count_every_request(store: Store, conv: pd.DataFrame) -> None:
    with store.session() as session:
        counts = token_counts(session, get_dataset(session, AZURE_CONV_NAME), "input_tokens")
    linear = bin_counts(counts, 40)
    expected, _ = np.histogram(
        conv["input_tokens"],
        bins=np.linspace(conv["input_tokens"].min(), conv.input_tokens.max() + 1, 41),
    )
    assert list(linear.requests) == list(expected)
    log = bin_counts(counts, 30, log=True)
    assert int(log.requests.sum()) == len(conv)
    ratios = log.upper / log.lower
    np.testing.assert_allclose(ratios, ratios[0])  # equal widths on a log scale
    assert log.lower[0] >= 1 and log.upper[-1] > conv["input_tokens"].max()


def test_log_histogram_counts_zero_lengths_in_the_first_bin() -> None:
    counts = pd.DataFrame({"tokens": [0, 1, 10, 100], "requests": [5, 1, 1, 1]})
    log = bin_counts(counts, 3, log=True)
    assert log.lower[0] == 1 and log.requests[0] == 6 and log.requests.sum() == 8
    assert bin_counts(counts.iloc[:0], 3).requests.size == 0
    with pytest.raises(UsageError, match="bins"):
        bin_counts(counts, 0)


def test_model_split(store: Store, write: WriteFile) -> None:
    ingest_file(store, write("burst.csv", MODELS), IngestOptions(start=START))
    with store.session() as session:
        split = model_split(session, get_dataset(session, "burst"))
    assert list(split["model"]) == ["ChatGPT", "(none)", "GPT-4"]  # busiest first, then by name
    assert list(split["requests"]) == [3, 1, 1]
    assert list(split["input_tokens"]) == [90, 40, 20]
    assert list(split["output_tokens"]) == [9, 4, 2]
    assert split["share"].tolist() == pytest.approx([0.6, 0.2, 0.2])


def test_dataset_summary_is_what_datasets_show_computes(store: Store, write: WriteFile) -> None:
    ingest_file(store, AZURE_CONV)
    ingest_file(store, write("burst.csv", MODELS), IngestOptions(start=START))
    with store.session() as session:
        for name in (AZURE_CONV_NAME, "burst"):
            dataset = get_dataset(session, name)
            assert dataset_summary(session, dataset) == summarize(
                request_frame(session, dataset.id)
            )
        burst = dataset_summary(session, get_dataset(session, "burst"))
    assert [m.model for m in burst.by_model] == ["(none)", "ChatGPT", "GPT-4"]
    assert burst.rows == 5


def test_summary_columns_of_every_request(store: Store, conv: pd.DataFrame) -> None:
    with store.session() as session:
        got = summary_columns(session, get_dataset(session, AZURE_CONV_NAME))
    assert list(got.columns) == ["arrival_us", "model", "input_tokens", "output_tokens"]
    ordered = got.sort_values(["arrival_us", "input_tokens"], ignore_index=True)
    expected = conv.sort_values(["arrival_us", "input_tokens"], ignore_index=True)
    pd.testing.assert_frame_equal(ordered, expected)


def test_records_and_content_key(store: Store, write: WriteFile) -> None:
    path = write("gappy.csv", GAPPY)
    ingest_file(store, path)
    with store.session() as session:
        [record] = dataset_records(session, with_key=True)
        assert record["name"] == "gappy" and record["rows"] == 4
        assert "content_key" not in dataset_records(session)[0]
        first_key = record["content_key"]
        assert first_key == content_key(get_dataset(session, "gappy"))
        assert span_s(record["start_at"], record["end_at"]) == 209.0
        delete_dataset(session, "gappy")
    ingest_file(store, path)  # the same file again, the same name, maybe the same id
    with store.session() as session:
        assert dataset_records(session, with_key=True)[0]["content_key"] != first_key


def test_choose_bucket_and_duration_text() -> None:
    assert choose_bucket_s(3600) == 60
    assert choose_bucket_s(7 * 86400) == 600
    assert choose_bucket_s(10 * 365 * 86400) == BUCKET_CHOICES_S[-1]
    assert all(b % 60 == 0 for b in BUCKET_CHOICES_S)
    assert duration_text(3502.0) == "0h 58m 22s"
    assert duration_text(7 * 86400 + 3600 + 59) == "7d 1h 0m"
    assert span_s(None, None) == 0.0
