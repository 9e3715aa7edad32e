"""Uploaded logs (bytes and a file name, as the dashboard receives them) through the ingest
pipeline: located errors name the uploaded file, a failed upload stores nothing, and the
options are checked as ``planner ingest`` checks them, named as the form names them."""

from __future__ import annotations

import gzip
import io
import tempfile
from pathlib import Path

import pytest

from planner.common.uploads import upload_file_name
from planner.errors import InputFileError, UsageError
from planner.ingest.options import CLI_NAMES, ingest_options
from planner.ingest.pipeline import IngestOptions, IngestResult, uploaded_source
from planner.store import Store
from planner.store.queries import get_dataset
from planner.store.requests import request_frame
from planner.store.summaries import dataset_records
from planner.usecases.ingest import IngestRequest, Upload, ingest
from tests.conftest import AZURE_CONV

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD = HEADER + "2024-06-01 00:00:01,10,20\n2024-06-01 00:00:02,30,40\n"
# Row 3 (line 4) has a bad token count: nothing of the file may be stored.
BAD = HEADER + "2024-06-01 00:00:01,10,20\n2024-06-01 00:00:02,30,40\n2024-06-01 00:00:03,x,1\n"
MOONCAKE = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'


def _upload(
    store: Store, file_name: str, data: bytes | io.BytesIO, options: IngestOptions | None = None
) -> IngestResult:
    """The dashboard's upload: the ingest use case on an upload, in ``store``."""
    request = IngestRequest(Upload(file_name, data), options or IngestOptions())
    return ingest(request, store.session)


def _uploads_left() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob("planner-upload-*"))


def test_a_bad_upload_is_located_in_the_uploaded_file_and_stores_nothing(store: Store) -> None:
    _upload(store, "first.csv", GOOD.encode())
    with store.session() as session:
        before = dataset_records(session)
    left = set(_uploads_left())
    with pytest.raises(InputFileError) as raised:
        _upload(store, "requests log.csv", BAD.encode())
    message = str(raised.value)
    assert message.startswith("requests log.csv: row 3, line 4, column 'ContextTokens'")
    assert "planner-upload-" not in message and tempfile.gettempdir() not in message
    assert raised.value.path == "requests log.csv"
    with store.session() as session:
        assert dataset_records(session) == before
    assert set(_uploads_left()) == left  # the temporary copy is gone


def test_a_good_upload_is_stored_under_its_file_name(store: Store) -> None:
    result = _upload(store, "my-trace.csv", io.BytesIO(GOOD.encode()))
    assert (result.status, result.dataset, result.rows, result.path) == (
        "ingested",
        "my-trace",
        2,
        "my-trace.csv",
    )
    with store.session() as session:
        dataset = get_dataset(session, "my-trace")
        assert dataset.source_path == uploaded_source("my-trace.csv") == "my-trace.csv (uploaded)"
        frame = request_frame(session, dataset.id)
    assert list(frame["input_tokens"]) == [10, 30]


def test_the_same_file_again_is_already_present(store: Store) -> None:
    _upload(store, "a.csv", GOOD.encode())
    again = _upload(store, "b.csv", GOOD.encode())
    assert (again.status, again.dataset, again.path) == ("already-present", "a", "b.csv")
    with store.session() as session:
        assert [r["name"] for r in dataset_records(session)] == ["a"]
        assert get_dataset(session, "a").source_path == "a.csv (uploaded)"


def test_compressed_upload_keeps_its_suffix_for_detection(store: Store) -> None:
    result = _upload(store, "conv.csv.gz", AZURE_CONV.read_bytes())
    assert (result.dataset, result.format, result.rows) == ("conv", "azure-llm", 19366)
    broken = gzip.compress(BAD.encode())
    with pytest.raises(InputFileError, match=r"^broken\.csv\.gz: row 3"):
        _upload(store, "broken.csv.gz", broken)


def test_messages_without_a_row_name_the_upload_too(store: Store) -> None:
    with pytest.raises(InputFileError, match=r"^empty\.csv: ") as raised:
        _upload(store, "empty.csv", b"")
    assert "planner-upload-" not in str(raised.value)
    with pytest.raises(InputFileError, match=r"^odd\.csv: cannot tell the log format") as raised:
        _upload(store, "odd.csv", b"a,b,c\n1,2,3\n")
    assert "planner-upload-" not in str(raised.value)


def test_relative_times_need_a_start(store: Store) -> None:
    with pytest.raises(UsageError, match="Start time"):
        ingest_options(start="yesterday-ish", names={"start": "Start time"})
    with pytest.raises(UsageError, match="relative to the start"):
        _upload(store, "trace.jsonl", MOONCAKE.encode())
    options = ingest_options(start="2024-05-01T00:00:00Z")
    result = _upload(store, "trace.jsonl", MOONCAKE.encode(), options)
    assert (result.format, result.rows) == ("mooncake", 1)
    assert f"{result.start_at:%Y-%m-%d %H:%M}" == "2024-05-01 00:00"


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("log.csv", "log.csv"),
        ("C:\\Users\\me\\log.csv", "log.csv"),
        ("/home/me/logs/log.csv.gz", "log.csv.gz"),
        ("  spaced name.jsonl ", "spaced name.jsonl"),
    ],
)
def test_upload_file_names(sent: str, kept: str) -> None:
    assert upload_file_name(sent) == kept


@pytest.mark.parametrize("sent", ["", "..", "/", "a\nb.csv", "x" * 201 + ".csv"])
def test_unusable_upload_file_names(sent: str, store: Store) -> None:
    with pytest.raises(UsageError, match="uploaded file name"):
        _upload(store, sent, GOOD.encode())


def test_ingest_options_name_what_the_user_typed() -> None:
    form = {"timezone": "Time zone", "time_format": "Time format", "name": "Dataset name"}
    with pytest.raises(UsageError, match="^Time zone 'Mars/Base': unknown time zone"):
        ingest_options(timezone="Mars/Base", names=form)
    with pytest.raises(UsageError, match="^--timezone 'Mars/Base'"):
        ingest_options(timezone="Mars/Base")
    with pytest.raises(UsageError, match="^Time format 'abc': no directives"):
        ingest_options(time_format="abc", names=form)
    with pytest.raises(UsageError, match="^Dataset name: the dataset name is empty"):
        ingest_options(name=" ", names=form)
    with pytest.raises(UsageError, match="^--format 'azure': unknown format"):
        ingest_options(log_format="azure")
    with pytest.raises(UsageError, match="^--on-error 'ignore'"):
        ingest_options(on_error="ignore")
    with pytest.raises(UsageError, match="--map"):
        ingest_options(mapping=["arrival"])
    options = ingest_options(
        mapping=["arrival=ts", "input_tokens=in", "output_tokens=out"],
        time_kind="epoch",
        time_unit="ms",
        timezone="Europe/Berlin",
        on_error="skip",
    )
    assert options.mapping == {"arrival": "ts", "input_tokens": "in", "output_tokens": "out"}
    assert (options.time.kind, options.time.unit, options.time.timezone) == (
        "epoch",
        "ms",
        "Europe/Berlin",
    )
    assert options.on_error == "skip"
    assert set(CLI_NAMES) >= set(form)
