"""``planner recommend`` / ``recommendations`` handed hostile input: every bad option is refused
with its name before any work, outputs are checked up front and written whole, a failed run
kills its worker processes, and nothing a user can type ends in an internal error (exit 70)."""

from __future__ import annotations

import errno
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures.process import _ExecutorManagerThread
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import psutil
import pytest
from typer.testing import CliRunner

from planner.cli import app
from planner.errors import UsageError
from planner.recommend import verify as verify_module
from planner.recommend.engine import recommend
from planner.recommend.inputs import Constraints, Demand, Request, SearchOptions, Targets
from planner.recommend.plot import write_html
from planner.recommend.space import enumerate_candidates
from planner.recommend.verify import Runner
from planner.simulate.metrics import SLO
from planner.store import Store
from planner.store.recommend_models import RecommendationRun
from planner.workload.rates import RateCurve
from pricing.model import PricePoint, Provider, PurchaseOption
from tests.conftest import DEMO_SAMPLE

START = datetime(2024, 1, 1, tzinfo=UTC)
TARGETS = ["--model", "llama-3.1-8b", "--slo-ttft-p99", "2s"]
SMALL = ["--gpu", "L4", "--max-seqs", "128", "--chunked-prefill", "on", "--verify-top", "2"]
SMALL += ["--workers", "1", "--no-compare-gpus", "--no-save", "-q"]


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("PLANNER_HOME", str(home))
    monkeypatch.delenv("PLANNER_DATABASE_URL", raising=False)
    monkeypatch.delenv("PLANNER_DEBUG", raising=False)
    return home


@pytest.fixture
def demo(home: Path) -> Path:
    result = cli("ingest", str(DEMO_SAMPLE), "--name", "demo", "-q")
    assert result.exit_code == 0, result.output
    return home


def point(instance: str, gpus: int, usd: float = 1.0) -> PricePoint:
    return PricePoint(
        provider=Provider.AWS,
        region="us-east-1",
        instance_type=instance,
        gpu_model="L4",
        gpu_count=gpus,
        purchase_option=PurchaseOption.ON_DEMAND,
        usd_per_hour=usd * gpus,
        source="test",
        effective_date="2024-01-01",
    )


PRICES = [point("g6.xlarge", 1), point("g6.12xlarge", 4), point("g6.48xlarge", 8)]


# --- numbers: NaN, infinities, out of range, each refused with its option's name ------------

BAD_NUMBERS = [
    ("--load-scale", "nan"),
    ("--load-scale", "inf"),
    ("--load-scale", "-1"),
    ("--load-scale", "0"),
    ("--budget", "nan"),
    ("--budget", "inf"),
    ("--budget", "-5"),
    ("--budget", "0"),
    ("--max-spot-share", "2"),
    ("--max-spot-share", "nan"),
    ("--max-spot-share", "-0.1"),
    ("--min-attainment", "1.5"),
    ("--min-attainment", "nan"),
    ("--min-attainment", "0"),
    ("--max-quality-loss", "nan"),
    ("--max-quality-loss", "inf"),
    ("--max-quality-loss", "-1"),
    ("--spot-interruptions-per-hour", "-1"),
    ("--spot-interruptions-per-hour", "nan"),
    ("--spot-interruptions-per-hour", "inf"),
    ("--tighten-margin", "nan"),
    ("--tighten-margin", "-0.5"),
    ("--tighten-margin", "1e9"),
]


@pytest.mark.parametrize(("option", "value"), BAD_NUMBERS)
def test_bad_numbers_are_refused_before_any_work(home: Path, option: str, value: str) -> None:
    result = cli("recommend", "--dataset", "demo", *TARGETS, *SMALL, option, value)
    assert result.exit_code == 2, result.output
    assert f"error: {option} " in result.stderr and "expected" in result.stderr
    assert not (home / "planner.db").exists()  # refused before the store was even opened


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "--seed"),
        (["--min-replicas", "1000000000"], "--min-replicas"),
        (["--max-seqs", "99999999999999"], "--max-seqs 99999999999999: expected a number"),
        (["--tp", "99999999999999999999"], "--tp 99999999999999999999: expected a number"),
        (["--tp", "two"], "--tp 'two': expected whole numbers"),
        (["--workers", "100000"], "--workers 100000: at most"),
        (["--precision", ","], "--precision ',': name at least one"),
        (["--provider", " , "], "--provider ' , ': name at least one"),
        (["--purchase", "bogus"], "--purchase: unknown purchase option 'bogus'"),
        (["--purchase", "spot"], "spot also needs --max-spot-share"),
        (["--spot-class", "default"], "give --max-spot-share too"),
        (["--chunked-prefill", "\x1b[31mred"], r"'\x1b[31mred'"),
        (["--max-requests", "0"], "--max-requests"),
    ],
)
def test_bad_options_are_refused_with_their_name(home: Path, args: list[str], message: str) -> None:
    result = cli("recommend", "--dataset", "demo", *TARGETS, *SMALL, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "internal error" not in result.output


# --- output files: checked before the work, written whole --------------------------------


@pytest.mark.parametrize("option", ["--out", "--plot"])
@pytest.mark.parametrize("where", ["missing-folder", "proc", "folder"])
def test_unwritable_outputs_fail_before_the_work(
    home: Path, tmp_path: Path, option: str, where: str
) -> None:
    path = {
        "missing-folder": tmp_path / "nowhere" / "result.out",
        "proc": Path("/proc/planner-result"),
        "folder": tmp_path,
    }[where]
    started = time.perf_counter()
    result = cli("recommend", "--dataset", "demo", *TARGETS, *SMALL, option, str(path))
    assert result.exit_code == 2, result.output
    assert f"error: {option} {path}" in result.stderr
    assert time.perf_counter() - started < 5
    assert not (home / "planner.db").exists()


def test_out_and_plot_cannot_be_the_same_file(home: Path, tmp_path: Path) -> None:
    same = str(tmp_path / "r.html")
    result = cli("recommend", "--dataset", "demo", *TARGETS, *SMALL, "--out", same, "--plot", same)
    assert result.exit_code == 2 and "--out and --plot name the same file" in result.stderr


def test_show_checks_its_plot_path_first(home: Path, tmp_path: Path) -> None:
    result = cli("recommendations", "show", "1", "--plot", str(tmp_path / "no" / "c.html"))
    assert result.exit_code == 2 and "error: --plot" in result.stderr


def test_show_refuses_an_id_beyond_the_store(home: Path) -> None:
    result = cli("recommendations", "show", "99999999999999999999999")
    assert result.exit_code == 2 and "recommendation_id" in result.output
    assert "internal error" not in result.output


def test_a_chart_is_written_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = recommend(small_request(), PRICES)
    data = result.to_dict()
    chart = tmp_path / "chart.html"
    chart.write_text("the previous chart", encoding="utf-8")
    real_write = Path.write_text

    def full_disk(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        real_write(self, text[:100], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(UsageError, match=r"--plot .*chart.html: could not write \(No space left"):
        write_html(data, chart)
    monkeypatch.undo()
    assert chart.read_text(encoding="utf-8") == "the previous chart"
    assert [p.name for p in tmp_path.iterdir()] == ["chart.html"]  # no temporary file left


# --- the load: bounded by what the machine can simulate -----------------------------------


def test_a_runaway_load_scale_is_refused_up_front(demo: Path, tmp_path: Path) -> None:
    started = time.perf_counter()
    result = cli("recommend", "--dataset", "demo", *TARGETS, *SMALL, "--load-scale", "1e9")
    assert result.exit_code == 2, result.output
    assert "more than --max-requests 1,000,000" in result.stderr
    assert "raise --max-requests" in result.stderr
    assert time.perf_counter() - started < 30

    curve = tmp_path / "demand.csv"
    curve.write_text("ds,y\n2025-01-06T00:00:00Z,3600\n2025-01-06T01:00:00Z,7200\n")
    result = cli(
        "recommend",
        "--demand",
        str(curve),
        "--tokens-from",
        "demo",
        *TARGETS,
        *SMALL,
        "--load-scale",
        "1e9",
    )
    assert result.exit_code == 2 and "busiest 1 hour at --load-scale 1e+09" in result.stderr
    # the override: a small limit refuses what the default lets through
    result = cli(
        "recommend",
        "--demand",
        str(curve),
        "--tokens-from",
        "demo",
        *TARGETS,
        *SMALL,
        "--max-requests",
        "1000",
    )
    assert result.exit_code == 2 and "7,200 requests, more than --max-requests 1,000" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "demo", "--tokens-from", "demo"], "--tokens-from goes with --demand"),
        (["--dataset", "demo", "--spot-class", "nosuch", "--max-spot-share", "0.5"], "nosuch"),
        (["--dataset", "demo", "--gpu", "Z100"], "--gpu: unknown GPU 'Z100'"),
        (["--dataset", "demo", "--provider", "oracle"], "--provider: unknown provider"),
        (["--dataset", "demo", "--region", "mars-1"], "--region: no price has region"),
        (["--dataset", "demo", "--instance-type", "g6.xlarg"], "closest priced ones: g6.xlarge"),
    ],
)
def test_contradicting_or_unknown_names(demo: Path, args: list[str], message: str) -> None:
    base = [a for a in SMALL if a not in ("L4",)]
    base.remove("--gpu")
    result = cli("recommend", *args, *TARGETS, *base)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_start_and_end_do_not_go_with_a_demand_curve(demo: Path, tmp_path: Path) -> None:
    curve = tmp_path / "demand.csv"
    curve.write_text("ds,y\n2025-01-06T00:00:00Z,3600\n")
    result = cli(
        "recommend",
        "--demand",
        str(curve),
        "--tokens-from",
        "demo",
        "--start",
        "2025-01-06T00:00:00Z",
        *TARGETS,
        *SMALL,
    )
    assert result.exit_code == 2 and "--start and --end pick a window of --dataset" in (
        result.stderr
    )


# --- no candidates: the reason, not "see the rejections above" -----------------------------


def small_request(**constraints: Any) -> Request:
    rng = np.random.default_rng(0)
    inputs = rng.integers(200, 1000, 256)
    outputs = rng.integers(50, 200, 256)
    return Request(
        Demand(RateCurve(START, np.array([360.0, 720.0])), inputs, outputs, "test"),
        Targets({"default": SLO(ttft_s=2.0)}),
        Constraints(
            model="llama-3.1-8b",
            precisions=("bf16",),
            max_seqs=(128,),
            chunked_prefill=(True,),
            **constraints,
        ),
        SearchOptions(verify_top=1, workers=1, growth_check=False, tighten_steps=0),
    )


def test_a_tp_no_instance_can_run_is_a_listed_rejection() -> None:
    candidates, rejected = enumerate_candidates(
        PRICES, Constraints(model="llama-3.1-8b", tp_degrees=(3, 16), max_tp=8)
    )
    assert candidates == []
    details = {r.candidate["tp"]: r.detail for r in rejected if r.reason == "tp-does-not-fit"}
    assert "divides no instance's GPU count" in details[3] and "1, 4, 8 GPUs" in details[3]
    assert details[16] == "TP 16 is above --max-tp 8"


def test_nothing_to_search_says_so_in_the_notes() -> None:
    result = recommend(small_request(tp_degrees=(3,)), PRICES)
    assert result.winner is None and result.stats["verified"] == 0
    assert [r["reason"] for r in result.rejected] == ["tp-does-not-fit"]
    assert any("nothing was simulated" in n for n in result.notes)
    assert not any("in simulation" in n for n in result.notes)


def test_unknown_instance_type_gets_suggestions() -> None:
    with pytest.raises(UsageError, match=r"--instance-type: .*'g6.xl'.*g6.xlarge"):
        enumerate_candidates(PRICES, Constraints(model="llama-3.1-8b", instance_types=("g6.xl",)))


# --- stored recommendations: odd names and odd rows ----------------------------------------


def test_list_and_show_print_names_as_text_not_markup(
    home: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the demand column
    with store.session() as session:
        run = RecommendationRun(
            demand_source="file d[/x].csv\x1b[31m",
            model="llama-3.1-8b",
            winner=None,
            monthly_usd=None,
            purchase=None,
            request={},
            result={"ranked": []},
        )
        session.add(run)
        session.flush()
        good = run.id
        broken = RecommendationRun(
            demand_source="x", model="m", request={}, result={"ranked": [{"id": 1}]}
        )
        session.add(broken)
        session.flush()
        broken_id = broken.id
    store_url = store.url
    listed = cli("--db", store_url, "recommendations", "list")
    assert listed.exit_code == 0, listed.output
    assert "[/x]" in listed.stdout and "\x1b" not in listed.stdout
    shown = cli("--db", store_url, "recommendations", "show", str(good))
    assert shown.exit_code == 0, shown.output
    assert "file d[/x].csv\\x1b[31m, llama-3.1-8b: none met the targets" in shown.stdout
    unreadable = cli("--db", store_url, "recommendations", "show", str(broken_id))
    assert unreadable.exit_code == 1, unreadable.output
    assert f"recommendation #{broken_id} is stored in a form this planner cannot read" in (
        unreadable.stderr
    )


# --- worker processes die with the run --------------------------------------------------------


def _sleep(task: Any, workloads: Any) -> None:
    time.sleep(120)


@pytest.fixture
def slow_verify(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(verify_module, "verify", _sleep)
    yield


def test_an_interrupted_runner_kills_its_workers_at_once(slow_verify: None) -> None:
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    tasks: Any = [SimpleNamespace(windows=()) for _ in range(2)]

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(3)
    started = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt), Runner(workers=2) as runner:
            runner.run(tasks, {})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < 15  # not the two minutes the tasks would take
    # the pool's manager thread ended with the runner: Python 3.11's exit hook raced its
    # closing pipe ("Bad file descriptor" at exit) when it was left running
    managers = [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread)]
    assert not [t for t in managers if t.is_alive()]
    workers = [p for p in me.children(recursive=True) if p.pid not in before]
    _gone, alive = psutil.wait_procs(workers, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


# --- more hostile values, found by the sweep -----------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "demo", "--dask", ""], "--dask is empty"),
        (["--dataset", "demo", "--dask", "garbage://x"], "--dask garbage://x: could not reach"),
        (["--demand", "", "--tokens-from", "demo"], "--demand is empty"),
        (["--dataset", " "], "--dataset is empty"),
    ],
)
def test_empty_or_malformed_sources(demo: Path, args: list[str], message: str) -> None:
    result = cli("recommend", *args, *TARGETS, *SMALL)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_demand_of_less_than_one_request_is_refused(demo: Path, tmp_path: Path) -> None:
    curve = tmp_path / "demand.csv"
    curve.write_text("ds,y\n2025-01-06T00:00:00Z,36\n", encoding="utf-8")
    result = cli(
        "recommend",
        "--demand",
        str(curve),
        "--tokens-from",
        "demo",
        "--load-scale",
        "1e-300",
        *TARGETS,
        *SMALL,
    )
    assert result.exit_code == 2, result.output
    assert "adds up to 3.6e-299 requests in all its hours, less than one" in result.stderr


def test_a_tiny_budget_is_not_printed_as_zero_dollars() -> None:
    result = recommend(small_request(budget_usd_per_month=1e-300), PRICES)
    details = [r["detail"] for r in result.rejected if r["reason"] == "over-budget"]
    assert details and all(d.endswith("budget $1e-300") for d in details)
    assert any("than the $1e-300 budget" in n for n in result.notes)


def test_more_verify_hours_than_the_demand_has_is_said() -> None:
    request = small_request()
    request = Request(
        request.demand,
        request.targets,
        request.constraints,
        SearchOptions(verify_top=1, workers=1, growth_check=False, tighten_steps=0, verify_hours=9),
    )
    notes = recommend(request, PRICES).notes
    assert "--verify-hours 9 is more than the demand's 2 hours: all of it was simulated" in notes
