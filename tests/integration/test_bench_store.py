"""Benchmark runs in the store (SQLite, and PostgreSQL when configured): saved whole or not at
all, read back as saved, listed, found by name or id, deleted with their requests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import func, select, text

from planner.bench.importers import import_result
from planner.bench.metrics import RequestRecord
from planner.bench.results import BenchRun, Load
from planner.errors import NotFoundError, UsageError
from planner.store import Store
from planner.store.bench_runs import (
    delete_run,
    get_run,
    list_runs,
    load_kind,
    run_requests,
    save_run,
)
from planner.store.models import BenchRequest, BenchRunRecord
from planner.store.queries import contents_version
from tests.conftest import ROOT

RESULTS = ROOT / "tests" / "fixtures" / "bench-results"
CATALOG_RUN = RESULTS / "vllm-bench-serve_catalog-metadata.json"


def imported_run() -> BenchRun:
    [run] = import_result(CATALOG_RUN)
    return run


def records(count: int, *, itls: int = 31) -> list[RequestRecord]:
    """Requests as ``planner bench run`` records them; every tenth one failed."""
    out = []
    for i in range(count):
        if i % 10 == 9:
            out.append(
                RequestRecord(
                    index=i,
                    start_s=i * 0.01,
                    status="failed",
                    input_tokens=128,
                    output_tokens=0,
                    output_tokens_source="chunks",
                    requested_output_tokens=32,
                    e2el_s=0.05,
                    http_status=500,
                    error_kind="http_500",
                    error="HTTP 500: injected failure",
                )
            )
            continue
        gaps = [0.02 + 0.001 * ((i + k) % 7) for k in range(itls)]
        ttft = 0.1 + 0.001 * (i % 13)
        out.append(
            RequestRecord(
                index=i,
                start_s=i * 0.01,
                status="ok",
                input_tokens=128,
                output_tokens=itls + 1,
                output_tokens_source="usage",
                requested_output_tokens=itls + 1,
                e2el_s=ttft + sum(gaps),
                ttft_s=ttft,
                tpot_s=sum(gaps) / itls,
                itl_s=gaps,
            )
        )
    return out


def count(store: Store, model: type[BenchRunRecord] | type[BenchRequest]) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_a_run_and_its_requests_read_back_as_saved(store: Store) -> None:
    run = imported_run()
    saved = records(40)
    with store.session() as session:
        run_id = save_run(session, run, saved, name="h100-poisson", target="http://gpu-1:8000")
    with store.session() as session:
        [listed] = list_runs(session)
        by_name = get_run(session, "h100-poisson")
        by_id = get_run(session, str(run_id))
        frame = run_requests(session, run_id, itls=True)
    assert listed == by_name == by_id
    assert listed.id == run_id and listed.name == "h100-poisson"
    assert listed.source == "imported-vllm" and listed.target == "http://gpu-1:8000"
    assert (listed.gpu, listed.num_gpus, listed.tp) == ("NVIDIA H100 80GB HBM3", 2, 2)
    assert (listed.model, listed.precision, listed.engine) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "fp8",
        "vllm",
    )
    assert (listed.load_kind, listed.load_value, listed.load_label) == (
        "poisson",
        2.5,
        "poisson 2.5/s",
    )
    assert (listed.completed, listed.failed, listed.requests) == (run.completed, run.failed, 40)
    assert listed.summary["mean_ttft_ms"] == run.ttft.mean
    assert listed.summary["p99_tpot_ms"] == run.tpot.p99
    assert listed.bench_run() == run  # the whole result comes back
    assert listed.created_at.tzinfo is not None

    assert list(frame["request_index"]) == list(range(40))
    assert list(frame["status"]).count("failed") == 4
    ok = frame[frame["status"] == "ok"]
    expected_ok = [r for r in saved if r.ok]
    assert np.allclose(ok["ttft_ms"], [r.ttft_s * 1000 for r in expected_ok if r.ttft_s])
    assert np.allclose(ok["e2e_ms"], [r.e2el_s * 1000 for r in expected_ok])
    assert np.allclose(ok.iloc[0]["itl_ms"], np.array(expected_ok[0].itl_s) * 1000, rtol=1e-6)
    assert ok.iloc[0]["error_kind"] is None and ok.iloc[0]["error"] is None
    failed = frame[frame["status"] == "failed"].iloc[0]
    assert failed["error_kind"] == "http_500" and "injected" in failed["error"]
    assert failed["itl_ms"] == [] and np.isnan(failed["ttft_ms"])


def test_deleting_a_run_removes_its_requests(store: Store) -> None:
    with store.session() as session:
        save_run(session, imported_run(), records(20), name="first")
        keep = save_run(session, imported_run(), records(5), name="second")
    with store.session() as session:
        deleted = delete_run(session, "first")
    assert deleted.name == "first" and deleted.requests == 20
    assert count(store, BenchRequest) == 5
    with store.session() as session:
        assert [r.name for r in list_runs(session)] == ["second"]
        # The database cascades too: a run removed by plain SQL takes its requests along.
        session.execute(text("DELETE FROM bench_runs WHERE id = :id"), {"id": keep})
    assert count(store, BenchRequest) == 0 and count(store, BenchRunRecord) == 0


def test_a_taken_name_is_refused_with_a_free_one_suggested(store: Store) -> None:
    with store.session() as session:
        save_run(session, imported_run(), name="baseline")
    clash = r"--name 'baseline'.*already.*e\.g\. baseline-2"
    with pytest.raises(UsageError, match=clash), store.session() as session:
        save_run(session, imported_run(), records(3), name="baseline")
    assert count(store, BenchRunRecord) == 1 and count(store, BenchRequest) == 0


@pytest.mark.parametrize("bad", ["", "   ", "12", "a\nb", "x" * 201])
def test_names_that_cannot_name_a_run_are_refused(store: Store, bad: str) -> None:
    with pytest.raises(UsageError, match="--name"), store.session() as session:
        save_run(session, imported_run(), name=bad)
    assert count(store, BenchRunRecord) == 0


def test_default_names_come_from_the_file_and_stay_unique(store: Store) -> None:
    run = imported_run()
    nameless = replace(run, info=replace(run.info, source_file=""))
    with store.session() as session:
        first = save_run(session, run)
        save_run(session, run)
        save_run(session, nameless)
    with store.session() as session:
        names = [r.name for r in list_runs(session)]
    stem = CATALOG_RUN.stem
    assert names == [stem, f"{stem}-2", f"run-{first + 2}"]


def test_a_failure_half_way_through_the_requests_leaves_nothing(store: Store) -> None:
    class ReadError(Exception):
        pass

    def failing() -> Iterator[RequestRecord]:
        good = records(5000)
        yield from good[:2500]
        raise ReadError("the JSONL ended in the middle of a line")

    with pytest.raises(ReadError), store.session() as session:
        save_run(session, imported_run(), failing(), name="half")
    assert count(store, BenchRunRecord) == 0 and count(store, BenchRequest) == 0

    bad = records(100)
    bad[60] = replace(bad[60], input_tokens=2**40)  # no 32-bit column holds it
    with pytest.raises(UsageError, match="request 60 .*input tokens"), store.session() as session:
        save_run(session, imported_run(), bad, name="overflow")
    assert count(store, BenchRunRecord) == 0 and count(store, BenchRequest) == 0


def test_saving_and_deleting_change_the_contents_version(store: Store) -> None:
    versions = []
    with store.session() as session:
        versions.append(contents_version(session))
        save_run(session, imported_run(), name="a")
    with store.session() as session:
        versions.append(contents_version(session))
        save_run(session, imported_run(), name="b")
    with store.session() as session:
        versions.append(contents_version(session))
        delete_run(session, "a")
    with store.session() as session:
        versions.append(contents_version(session))
    assert len(set(versions)) == 4, versions


def test_unknown_runs_are_named_with_the_closest_stored_ones(store: Store) -> None:
    with pytest.raises(NotFoundError, match="no benchmark runs yet"), store.session() as session:
        get_run(session, "nothing")
    with store.session() as session:
        for name in ("h100-sync", "h100-c8", "l4-sync"):
            save_run(session, imported_run(), name=name)
    suggested = r"'h100-sinc'; stored runs: h100-sync, "
    with pytest.raises(NotFoundError, match=suggested), store.session() as session:
        get_run(session, "h100-sinc")
    with pytest.raises(NotFoundError), store.session() as session:
        delete_run(session, "999")
    assert count(store, BenchRunRecord) == 3


def test_a_sweep_keeps_its_stages_together(store: Store) -> None:
    run = imported_run()
    with store.session() as session:
        for rate in (1.0, 2.0, 4.0):
            stage = replace(run, info=replace(run.info, load=Load("qps", rate, "constant")))
            save_run(session, stage, name=f"sweep-{rate:g}", group="sweep-1")
        save_run(session, run, name="alone")
    with store.session() as session:
        stages = list_runs(session, group="sweep-1")
        everything = list_runs(session)
    assert [(s.load_kind, s.load_value) for s in stages] == [
        ("rate", 1.0),
        ("rate", 2.0),
        ("rate", 4.0),
    ]
    assert [s.sweep for s in everything] == ["sweep-1"] * 3 + [None]


def test_load_kinds_read_as_a_person_names_them() -> None:
    assert load_kind(Load("concurrency", 1.0)) == ("sync", 1.0)
    assert load_kind(Load("concurrency", 8.0)) == ("concurrency", 8.0)
    assert load_kind(Load("qps", 2.0, "poisson")) == ("poisson", 2.0)
    assert load_kind(Load("qps", 2.0, "gamma")) == ("gamma", 2.0)
    assert load_kind(Load("qps", 2.0)) == ("rate", 2.0)
    assert load_kind(Load("qps", 2.0, "trace")) == ("replay", 2.0)
    assert load_kind(Load("max")) == ("max", None)


def test_a_measured_run_keeps_what_bench_run_recorded(store: Store) -> None:
    run = imported_run()
    measured = replace(run, info=replace(run.info, tool="planner bench run", source_file=""))
    with store.session() as session:
        run_id = save_run(
            session, measured, records(3), details={"url": "http://127.0.0.1:8000", "x": 1.5}
        )
    with store.session() as session:
        stored = get_run(session, run_id)
    assert stored.source == "measured" and stored.name == f"run-{run_id}"
    assert stored.details == {"url": "http://127.0.0.1:8000", "x": 1.5}
    assert stored.to_dict()["metadata"]["tool"]["name"] == "planner bench run"


def test_ten_thousand_requests_save_quickly(store: Store) -> None:
    many = records(10_000)
    started = time.perf_counter()
    with store.session() as session:
        run_id = save_run(session, imported_run(), many, name="big")
    elapsed = time.perf_counter() - started
    with store.session() as session:
        frame = run_requests(session, run_id)
    assert len(frame) == 10_000 and frame["request_index"].is_monotonic_increasing
    if store.engine.dialect.name == "sqlite":
        assert elapsed < 1.0, f"saving 10,000 requests took {elapsed:.2f} s"
