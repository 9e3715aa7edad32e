"""``planner simulate`` handed hostile input: a clear error (never exit 70, never a runaway),
or a correct result that prints no misleading value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DEMO_SAMPLE, WriteFile
from tests.e2e.test_cli import run

GPU = ["--gpu", "H100-SXM", "--model", "llama-3.1-8b", "--precision", "fp8"]
SIM = ["simulate", "--dataset", "demo", *GPU, "-q"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("sim-hostile") / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    return home


def _fails(home: Path, args: list[str], message: str, code: int = 2) -> str:
    result = run(home, *args)
    assert result.returncode == code, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr
    assert "\x1b" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("option", ["--out-requests", "--out-summary", "--out-timeline"])
@pytest.mark.parametrize("where", ["missing folder", "proc", "folder"])
def test_unwritable_outputs_fail_before_the_work(
    home: Path, tmp_path: Path, option: str, where: str
) -> None:
    path = {
        "missing folder": tmp_path / "no" / "out.csv",
        "proc": Path("/proc/out.csv"),
        "folder": tmp_path,
    }[where]
    expected = {
        "missing folder": f"folder {tmp_path / 'no'} does not exist",
        "proc": "cannot write there",
        "folder": "is a folder",
    }[where]
    _fails(home, [*SIM, option, str(path)], f"error: {option} {path}: {expected}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # runaways: refused up front, with the way out named
        (["--load-scale", "1e9"], "over the limit of 10,000,000 (--max-requests"),
        (["--replicas", "200000"], "a fleet of up to 200,000 replicas is over the 100,000"),
        (["--autoscale", "--max-replicas", "200000"], "raise --max-requests to run it anyway"),
        (["--schedule", "2,200000"], "a fleet of up to 200,000 replicas"),
        (["--max-seqs", "1000000000"], "Invalid value for '--max-seqs'"),
        # every float option: nan, inf, negative, zero
        (["--load-scale", "nan"], "--load-scale nan: expected a positive number"),
        (["--load-scale", "0"], "--load-scale 0: expected a positive number"),
        (["--spot-interruptions-per-hour", "nan"], "--spot-interruptions-per-hour nan: expected"),
        (["--spot-interruptions-per-hour", "inf"], "--spot-interruptions-per-hour inf: expected"),
        (["--autoscale", "--target-utilization", "nan"], "--target-utilization nan: expected"),
        (["--autoscale", "--target-utilization", "-1"], "--target-utilization -1: expected"),
        (["--autoscale", "--target-queue", "0"], "--target-queue 0: expected a positive number"),
        (["--prefix-hit-rate", "inf"], "--prefix-hit-rate inf: expected a share in [0, 1)"),
        (["--response-cache-hit-rate", "nan"], "--response-cache-hit-rate nan: expected"),
        (["--price-per-hour", "inf"], "--price-per-hour inf: expected a price"),
        (["--price-per-hour", "-4"], "--price-per-hour -4: expected a price"),
        (["--spot", "1", "--price-per-hour", "3"], "give --spot-price-per-hour too"),
        (["--rate-limit", "default=nan"], "RPS a finite number > 0"),
        (["--rate-limit", "nope=1"], "--rate-limit: unknown class 'nope'; the workload's classes"),
        # durations
        (["--slo-ttft", "0s"], "--slo-ttft '0s': expected a duration above 0"),
        (["--slo-ttft", "9" * 400], "--slo-ttft '9999"),
        (["--slo", "default:ttft=0ms"], "expected a duration above 0"),
        (["--cold-start", "1e999", "--autoscale"], "--cold-start '1e999': expected a duration"),
        # checked without --autoscale too: never silently unused
        (["--cold-start", "forever"], "--cold-start 'forever': expected a duration"),
        (["--warm-start", "soon"], "--warm-start 'soon': expected a duration"),
        # the rest
        (["--seed", "-1"], "Invalid value for '--seed'"),
        (["--schedule", ""], "--schedule: expected non-negative replica counts"),
        (["--out-requests", "requests.txt"], "unsupported output format '.txt'"),
        (["--gpu", "\x1b[31mH100"], "unknown GPU '\\x1b[31mH100'"),
    ],
)
def test_bad_options_are_clear_errors(home: Path, args: list[str], message: str) -> None:
    _fails(home, [*SIM, *args], message)


def test_schedule_that_is_a_folder(home: Path, tmp_path: Path) -> None:
    _fails(home, [*SIM, "--schedule", str(tmp_path)], "not a file of replica counts")


@pytest.mark.parametrize(
    ("content", "message", "code"),
    [
        ("ds,y\n2025-01-06T00:00:00Z,1e12\n", "about 1,000,000,000,000 requests, over the", 2),
        ("ds,y\n2025-01-06T00:00:00Z,1e308\n", "about 1e+308 requests", 2),
        ("ds,y\n9999-12-31T23:00:00Z,5\n", "row 1, line 2, column 'ds'", 1),
        ("\ufeffds,y\n2025-01-06T00:00:00Z,-1\n", "row 1, line 2, column 'y': '-1'", 1),
        ("ds,y\n2025-01-06T00:00:00Z,0.5\n", "asks for 0.5 requests in all over 1 hour(s)", 2),
    ],
)
def test_bad_rate_curves(
    home: Path, write: WriteFile, content: str, message: str, code: int
) -> None:
    rates = write("rates.csv", content)
    args = ["simulate", "--rates", str(rates), "--tokens-from", "demo", *GPU, "-q"]
    _fails(home, args, message, code)


def test_max_requests_refuses_and_allows(home: Path) -> None:
    small = [*SIM, "--load-scale", "0.05"]
    _fails(home, [*small, "--max-requests", "500"], "about 968 requests, over the limit of 500")
    result = run(home, *small, "--max-requests", "2000", "--json")
    assert result.returncode == 0, result.stderr
    assert 800 < json.loads(result.stdout)["requests"] < 1200


def test_no_slo_prints_na_and_no_replica_prints_zero_gpu_hours(home: Path) -> None:
    """Without a target, attainment and goodput are n/a (null), not 100%; a schedule of no
    replicas prints GPU-hours 0, not an empty value."""
    args = [*SIM, "--load-scale", "0.02", "--schedule", "0"]
    result = run(home, *args)
    assert result.returncode == 0, result.stderr
    assert "SLO attainment n/a; goodput n/a;" in result.stdout
    assert "GPU-hours 0;" in result.stdout and "GPU-hours ;" not in result.stdout
    data = json.loads(run(home, *args, "--json").stdout)
    overall = data["summary"]["all"]
    assert overall["slo_attainment"] is None and overall["goodput_rps"] is None
    assert overall["rejected"] == data["requests"] > 0

    targeted = run(home, *SIM, "--load-scale", "0.02", "--slo-ttft", "2s", "--json")
    assert 0 < json.loads(targeted.stdout)["summary"]["all"]["slo_attainment"] <= 1
