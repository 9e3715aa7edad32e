"""``planner recommend`` as a real process handed hostile conditions: signals mid-run, a store
locked by another writer at save time, a rate-curve file named like console markup, constraints
that leave nothing to search."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import DEMO_SAMPLE
from tests.e2e.test_cli import PLANNER, run

TARGETS = ["--model", "llama-3.1-8b", "--slo-ttft-p99", "2s", "--slo-tpot-p99", "200ms"]
SMALL = ["--gpu", "L4", "--max-seqs", "128", "--chunked-prefill", "on", "--verify-top", "2"]
SMALL += ["--workers", "1", "--no-compare-gpus", "-q"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rec-hostile") / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    # the list prices are stored on first use: done here, so a test's run only reads them
    assert run(home, "prices", "list", "--json").returncode == 0
    return home


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    env.update(PLANNER_HOME=str(home), COLUMNS="200", **extra)
    return env


# --- signals: the worker processes die with the run ---------------------------------------


def _workers_started(parent: psutil.Process, timeout: float = 120) -> list[psutil.Process]:
    """The pool's worker processes, once the run has started them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if parent.status() == psutil.STATUS_ZOMBIE:
            break
        children = parent.children(recursive=True)
        if len(children) >= 2:
            time.sleep(0.5)  # let the pool finish starting
            started: list[psutil.Process] = parent.children(recursive=True)
            return started
        time.sleep(0.1)
    raise AssertionError("the run never started its worker processes")


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    left = []
    for p in processes:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            pass
    return left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_recommend_ends_its_workers(home: Path, sig: signal.Signals) -> None:
    # the whole log at 20 times its load (390k requests an hour) on two processes: the run
    # takes about 10 s, so the signal lands mid-work (at the log's own load the simulator
    # finishes its verifications within a second, and the signal raced the run's end)
    command = [PLANNER, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--no-save"]
    command += ["--load-scale", "20"]
    command[command.index("--workers") + 1] = "2"
    command[command.index("--verify-top") + 1] = "4"
    process = subprocess.Popen(
        command,
        env=env_for(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        parent = psutil.Process(process.pid)
        workers = _workers_started(parent)
        os.kill(process.pid, sig)
        process.wait(timeout=20)
        _gone, alive = psutil.wait_procs(workers, timeout=5)
        assert not _alive(alive), f"workers still running after {sig.name}: {alive}"
        if sig is signal.SIGTERM:
            assert process.returncode == 128 + signal.SIGTERM
            assert process.stderr is not None
            err = process.stderr.read()
            assert "stopped by SIGTERM" in err and "Traceback" not in err
    finally:
        if process.poll() is None:
            process.kill()
        for p in psutil.Process().children(recursive=True):
            if p.pid != process.pid and "planner" in " ".join(p.cmdline()):
                p.kill()


# --- the store locked by another writer when the result is saved ---------------------------


def test_a_locked_store_at_save_time_loses_no_result(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    lock = sqlite3.connect(home / "planner.db", timeout=1, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # the write lock: readers go on, writers wait
        result = subprocess.run(
            [
                PLANNER,
                "recommend",
                "--dataset",
                "demo",
                "--load-scale",
                "0.01",
                *TARGETS,
                *SMALL,
                "--out",
                str(out),
                "--json",
            ],
            env=env_for(home, PLANNER_DB_BUSY_TIMEOUT="0.2"),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        lock.rollback()
        lock.close()
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)  # the result is printed all the same
    assert data["winner"] is not None and "id" not in data
    assert json.loads(out.read_text(encoding="utf-8"))["winner"] == data["winner"]
    assert f"printed and written to {out} but not stored" in result.stderr
    assert "busy" in result.stderr
    assert "INSERT" not in result.stderr and "Traceback" not in result.stderr
    listed = run(home, "recommendations", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


# --- messages that name what happened --------------------------------------------------------


def test_a_tp_no_instance_can_run_is_explained(home: Path) -> None:
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--tp", "3")
    assert result.returncode == 1, result.stderr
    assert "see the rejections above" not in result.stderr
    assert "TP 3 divides no instance's GPU count" in result.stderr
    assert "rejected: tp-does-not-fit 1" in result.stdout
    assert "nothing was simulated" in result.stderr


def test_a_demand_file_named_like_markup_is_printed_as_is(home: Path, tmp_path: Path) -> None:
    (tmp_path / "d[").mkdir()
    curve = tmp_path / "d[" / "x].csv"  # "[/x]" in the path: a closing tag to rich
    curve.write_text("ds,y\n2025-01-06T00:00:00Z,36\n2025-01-06T01:00:00Z,72\n", encoding="utf-8")
    result = run(
        home,
        "recommend",
        "--demand",
        str(curve),
        "--tokens-from",
        "demo",
        *TARGETS,
        *SMALL,
        "--no-save",
    )
    assert result.returncode == 0, result.stderr
    assert f"demand: file {curve}: 2 h" in result.stdout


def test_an_unwritable_out_fails_before_the_work(home: Path) -> None:
    started = time.monotonic()
    result = run(home, "recommend", "--dataset", "demo", *TARGETS, *SMALL, "--out", "/proc/x")
    assert result.returncode == 2
    assert "error: --out /proc/x: cannot write there" in result.stderr
    assert time.monotonic() - started < 20
