"""The Request logs page under AppTest, on real stores: uploads through the real uploader widget
and the real ingest pipeline, the dataset summaries and charts."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app.common import UPLOAD_LIMIT_MB
from planner.demo import DATASET
from planner.store import open_store
from planner.store.queries import get_dataset
from planner.store.requests import request_frame
from planner.store.summaries import dataset_records
from tests.dashboard.conftest import no_exception

Page = Callable[[str], AppTest]
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD = HEADER + "".join(
    f"2024-06-01 00:{minute:02d}:{second:02d},{100 + minute},{10 + second}\n"
    for minute in range(3)
    for second in (5, 35)
)
BAD = HEADER + "2024-06-01 00:00:01,10,20\n2024-06-01 00:00:02,ten,20\n"
BURST = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "0,ChatGPT,10,1,11,Conversation log\n"
    "1,GPT-4,20,2,22,API log\n"
    "2,ChatGPT,30,3,33,Conversation log\n"
)


def _records(home: Path) -> list[dict[str, Any]]:
    with open_store(f"sqlite:///{home / 'planner.db'}") as store, store.session() as session:
        return dataset_records(session)


def _upload(at: AppTest, name: str, content: bytes, **fields: str) -> AppTest:
    at.file_uploader(key="logs-upload").set_value((name, content, "text/csv")).run()
    for key, value in fields.items():
        at.text_input(key=f"logs-{key}").input(value)
    return at.button(key="logs-ingest").click().run()


def _chart(at: AppTest, title: str) -> dict[str, Any]:
    for element in at.get("plotly_chart"):
        spec: dict[str, Any] = json.loads(element.proto.spec)
        if title in json.dumps(spec["layout"].get("title", "")):
            return spec
    raise AssertionError(f"no chart titled {title!r}")


def _values(data: Any) -> list[Any]:
    """A trace's values as plotly serialises them: a list, or a typed array in base64."""
    if isinstance(data, dict):
        values: list[Any] = np.frombuffer(
            base64.b64decode(data["bdata"]), dtype=data["dtype"]
        ).tolist()
        return values
    return list(data)


def test_empty_store_offers_the_upload(empty_home: Path, page: Page) -> None:
    at = page("logs")
    no_exception(at)
    assert at.title[0].value == "Request logs"
    uploader = at.file_uploader(key="logs-upload")
    assert {".csv", ".gz", ".jsonl", ".parquet"} <= set(uploader.allowed_type)
    intro = " ".join(m.value for m in at.markdown)
    assert f"{UPLOAD_LIMIT_MB:,} MB" in intro
    for accepted in ("CSV", "CSV.gz", "JSON Lines", "Parquet", "Azure", "Mooncake", "BurstGPT"):
        assert accepted in intro
    assert at.button(key="logs-ingest").disabled  # nothing uploaded yet
    assert any("No datasets" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_demo_dataset_summary_and_charts(demo_home: Path, page: Page) -> None:
    at = page("logs")
    no_exception(at)
    assert at.selectbox(key="logs-dataset").value == DATASET
    with open_store(f"sqlite:///{demo_home / 'planner.db'}") as store, store.session() as session:
        frame = request_frame(session, get_dataset(session, DATASET).id)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Requests"] == f"{len(frame):,}"
    p50, p99 = np.percentile(frame["input_tokens"], [50, 99])
    assert metrics["Input tokens P50"] == f"{p50:,.0f}"
    assert metrics["Input tokens P99"] == f"{p99:,.0f}"
    assert metrics["Output tokens P99"] == f"{np.percentile(frame['output_tokens'], 99):,.0f}"
    span_s = (frame["arrival_us"].iloc[-1] - frame["arrival_us"].iloc[0]) / 1e6
    assert metrics["Mean req/s"] == f"{len(frame) / span_s:,.2f}"
    table = at.dataframe[0].value
    assert list(table["name"]) == [DATASET] and list(table["requests"]) == [len(frame)]

    arrivals = _chart(at, "Arrivals")
    assert arrivals["layout"]["yaxis"]["title"]["text"] == "requests / min"
    # one point per minute of the log, summing to every request
    assert sum(_values(arrivals["data"][0]["y"])) == len(frame)
    tokens = _chart(at, "Input token lengths")
    assert tokens["layout"]["xaxis"]["title"]["text"] == "tokens"
    assert tokens["layout"]["xaxis"]["type"] == "linear"
    assert sum(_values(tokens["data"][0]["y"])[:-1]) == len(
        frame
    )  # the last edge repeats the last bin
    at.toggle(key="logs-log-x").set_value(True).run()
    no_exception(at)
    assert _chart(at, "Input token lengths")["layout"]["xaxis"]["type"] == "log"
    assert any("The log names no model" in c.value for c in at.caption)
    # CSV and JSON under every table and chart: datasets, arrivals, input and output lengths
    assert len(at.get("download_button")) >= 8


def test_a_bad_upload_shows_the_located_error_and_stores_nothing(
    demo_home: Path, page: Page
) -> None:
    before = _records(demo_home)
    at = _upload(page("logs"), "bad log.csv", BAD.encode())
    no_exception(at)
    [error] = at.error
    assert error.value.startswith("bad log.csv: row 2, line 3, column 'ContextTokens'")
    assert "expected a non-negative integer" in error.value
    assert "planner-upload-" not in error.value and "Traceback" not in error.value
    assert _records(demo_home) == before
    assert list(at.selectbox(key="logs-dataset").options) == [DATASET]


def test_a_good_upload_is_listed_and_selected(empty_home: Path, page: Page) -> None:
    at = page("logs")
    at.file_uploader(key="logs-upload").set_value(("june.csv", GOOD.encode(), "text/csv")).run()
    assert at.text_input(key="logs-name").value == "june"  # the default: the file's name
    at.text_input(key="logs-name").input("june-trace")
    at.button(key="logs-ingest").click().run()
    no_exception(at)
    assert not at.error
    [success] = at.success
    assert "june-trace" in success.value and "6 rows" in success.value
    [record] = _records(empty_home)
    assert (record["name"], record["rows"], record["source_path"]) == (
        "june-trace",
        6,
        "june.csv (uploaded)",
    )
    assert list(at.dataframe[0].value["name"]) == ["june-trace"]
    assert at.selectbox(key="logs-dataset").value == "june-trace"
    assert {m.label: m.value for m in at.metric}["Requests"] == "6"
    arrivals = _chart(at, "Arrivals")
    assert _values(arrivals["data"][0]["y"]) == [2, 2, 2]  # two requests in each of three minutes

    # The same file again: already present, nothing added.
    at.button(key="logs-ingest").click().run()
    no_exception(at)
    assert any("already present as dataset **june-trace**" in i.value for i in at.info)
    assert len(_records(empty_home)) == 1


def test_compressed_upload(empty_home: Path, page: Page) -> None:
    at = _upload(page("logs"), "gz-trace.csv.gz", gzip.compress(GOOD.encode()))
    no_exception(at)
    assert "gz-trace" in at.success[0].value
    assert [r["name"] for r in _records(empty_home)] == ["gz-trace"]


def test_relative_times_ask_for_the_start(empty_home: Path, page: Page) -> None:
    at = _upload(page("logs"), "burst.csv", BURST.encode())
    no_exception(at)
    assert "relative to the start of the log" in at.error[0].value
    assert _records(empty_home) == []
    at.text_input(key="logs-start").input("not a time")
    at.button(key="logs-ingest").click().run()
    assert at.error[0].value.startswith("Start time 'not a time': expected an ISO 8601")
    at.text_input(key="logs-start").input("2024-05-01T00:00:00Z")
    at.button(key="logs-ingest").click().run()
    no_exception(at)
    assert not at.error and "3 rows" in at.success[0].value
    # two models: the split is drawn, busiest first
    chart = at.get("plotly_chart")[-1]
    bars = json.loads(chart.proto.spec)["data"][0]
    assert (_values(bars["y"]), _values(bars["x"])) == (["ChatGPT", "GPT-4"], [2, 1])


@pytest.mark.parametrize("skip", [False, True])
def test_bad_rows_can_be_skipped(empty_home: Path, page: Page, skip: bool) -> None:
    at = page("logs")
    at.toggle(key="logs-skip-bad").set_value(skip)
    at = _upload(at, "partly.csv", (BAD + "2024-06-01 00:00:03,30,40\n").encode())
    no_exception(at)
    if skip:
        assert "2 rows" in at.success[0].value
        assert any("skipped 1 bad rows" in w.value for w in at.warning)
    else:
        assert "row 2, line 3" in at.error[0].value
        assert _records(empty_home) == []


def test_delete_needs_confirmation(empty_home: Path, page: Page) -> None:
    at = _upload(page("logs"), "gone.csv", GOOD.encode())
    assert at.button(key="logs-delete").disabled
    at.checkbox(key="logs-delete-confirm").check().run()
    at.button(key="logs-delete").click().run()
    no_exception(at)
    assert _records(empty_home) == []
    assert any("Deleted dataset **gone**" in s.value for s in at.success)
    assert any("No datasets" in i.value for i in at.info)


@pytest.mark.parametrize("any_time", [False, True])
def test_a_log_from_1969_needs_the_option_to_keep_any_time(
    empty_home: Path, page: Page, any_time: bool
) -> None:
    """Arrivals outside 1970 to a year ahead are refused as a likely wrong unit, on the page as
    in the CLI, unless the analyst says the log really is that old."""
    at = page("logs")
    at.checkbox(key="logs-any-time").set_value(any_time)
    at = _upload(at, "old.csv", GOOD.replace("2024-06-01", "1969-06-01").encode())
    no_exception(at)
    if any_time:
        assert "6 rows" in at.success[0].value
    else:
        assert "1969-06-01" in at.error[0].value and "row 1, line 2" in at.error[0].value
        assert _records(empty_home) == []
