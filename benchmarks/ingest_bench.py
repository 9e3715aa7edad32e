"""Ingestion benchmark: synthetic azure-llm CSV logs into a fresh SQLite store.

For each size this script writes a realistic ``azure-llm`` CSV (Poisson arrivals, lognormal token
counts), then ingests it in a child process of its own, so that the peak memory reported is that
of one ingest alone. It prints a table and can write the results, with the machine's details, as
JSON.

    python benchmarks/ingest_bench.py                       # 1M and 10M rows
    python benchmarks/ingest_bench.py --rows 200000 --json /tmp/ingest_bench.json

This is a script, not a timed test: absolute numbers depend on the machine, so compare ratios
within one run, on one machine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:
    import psutil
except ImportError:  # psutil comes with the `bench` extra; without it, getrusage alone
    psutil = None

DEFAULT_ROWS = (1_000_000, 10_000_000)
GEN_CHUNK_ROWS = 1_000_000
RATE_PER_SECOND = 20.0  # mean arrival rate of the Poisson process
TRACE_START = "2023-11-16 18:15:46"
# Lognormal token counts, shaped on the Azure LLM inference trace (2023, conversation):
# means of about 1155 input and 211 output tokens, long right tails.
INPUT_SIGMA = 0.9
INPUT_MEAN = 1155.0
OUTPUT_SIGMA = 0.85
OUTPUT_MEAN = 211.0
MAX_INPUT_TOKENS = 32_000
MAX_OUTPUT_TOKENS = 4_096
SEED = 20231116
SAMPLE_INTERVAL_S = 0.05

TARGET_ROWS_PER_SECOND = 200_000
TARGET_PEAK_RSS_BYTES = 2 << 30  # 2 GiB
TARGET_PEAK_RSS_ROWS = 10_000_000  # the memory target applies to this size

MIB = 1 << 20


@dataclass
class BenchResult:
    rows: int
    file_bytes: int
    generate_seconds: float
    ingest_seconds: float  # IngestResult.seconds: hashing, reading, normalising, inserting
    child_seconds: float  # the whole child: imports, opening and migrating the store, ingest
    rows_per_second: float
    peak_rss_bytes: int  # ru_maxrss of the child
    sampled_peak_rss_bytes: int | None  # highest RSS seen by polling the child with psutil
    db_bytes: int  # the SQLite file plus any -wal / -shm left after closing the store


def _lognormal_mu(mean: float, sigma: float) -> float:
    """The mu of a lognormal with this mean and sigma."""
    return float(np.log(mean) - sigma**2 / 2)


def generate_csv(path: Path, rows: int, seed: int = SEED) -> None:
    """Write ``rows`` requests in the azure-llm layout, ``GEN_CHUNK_ROWS`` at a time."""
    rng = np.random.default_rng(seed)
    start_us = pd.Timestamp(TRACE_START).value // 1000
    clock_us = 0.0  # microseconds since TRACE_START of the last request written
    in_mu = _lognormal_mu(INPUT_MEAN, INPUT_SIGMA)
    out_mu = _lognormal_mu(OUTPUT_MEAN, OUTPUT_SIGMA)
    with path.open("w", newline="") as fh:
        written = 0
        while written < rows:
            n = min(GEN_CHUNK_ROWS, rows - written)
            gaps_us = rng.exponential(1e6 / RATE_PER_SECOND, n)
            offsets_us = clock_us + np.cumsum(gaps_us)
            clock_us = float(offsets_us[-1])
            arrivals = pd.to_datetime(start_us + np.rint(offsets_us).astype(np.int64), unit="us")
            context = np.clip(np.rint(rng.lognormal(in_mu, INPUT_SIGMA, n)), 1, MAX_INPUT_TOKENS)
            generated = np.clip(
                np.rint(rng.lognormal(out_mu, OUTPUT_SIGMA, n)), 1, MAX_OUTPUT_TOKENS
            )
            frame = pd.DataFrame(
                {
                    "TIMESTAMP": arrivals,
                    "ContextTokens": context.astype(np.int64),
                    "GeneratedTokens": generated.astype(np.int64),
                }
            )
            frame.to_csv(fh, index=False, header=written == 0, date_format="%Y-%m-%d %H:%M:%S.%f")
            written += n


def db_size(db_path: Path) -> int:
    """Bytes on disk of the SQLite database and its -wal / -shm files."""
    files = [
        db_path,
        db_path.with_name(db_path.name + "-wal"),
        db_path.with_name(db_path.name + "-shm"),
    ]
    return sum(f.stat().st_size for f in files if f.exists())


def run_child(csv_path: Path, db_path: Path) -> dict[str, Any]:
    """The ingest itself, run in the child process: one file into a fresh store."""
    began = time.perf_counter()
    from planner.ingest import IngestOptions, ingest_file
    from planner.store import open_store

    with open_store(f"sqlite:///{db_path.resolve()}") as store:
        result = ingest_file(store, csv_path, IngestOptions())
    child_seconds = time.perf_counter() - began
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = maxrss if sys.platform == "darwin" else maxrss * 1024
    return {
        "rows": result.rows,
        "seconds": result.seconds,
        "child_seconds": child_seconds,
        "peak_rss_bytes": peak,
        "format": result.format,
        "status": result.status,
    }


def ingest_in_child(csv_path: Path, db_path: Path) -> tuple[dict[str, Any], int | None]:
    """Run the ingest in a fresh interpreter; its report, and the peak RSS psutil saw."""
    for leftover in (db_path, db_path.with_name(db_path.name + "-wal")):
        leftover.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(csv_path), str(db_path)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        sampled: int | None = None
        if psutil is not None:
            watched = psutil.Process(proc.pid)
            sampled = 0
            while proc.poll() is None:
                try:
                    sampled = max(sampled, int(watched.memory_info().rss))
                except psutil.Error:  # the child has just exited
                    break
                time.sleep(SAMPLE_INTERVAL_S)
        out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"ingest of {csv_path} failed (exit status {proc.returncode})")
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report, sampled


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    cpu_model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    ram_bytes: int | None = None
    if psutil is not None:
        ram_bytes = int(psutil.virtual_memory().total)
    else:
        meminfo = Path("/proc/meminfo")
        if meminfo.exists():
            for line in meminfo.read_text().splitlines():
                if line.startswith("MemTotal:"):
                    ram_bytes = int(line.split()[1]) * 1024
                    break
    return {
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "ram_bytes": ram_bytes,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "numpy": _version("numpy"),
        "pandas": _version("pandas"),
        "pyarrow": _version("pyarrow"),
        "sqlalchemy": _version("sqlalchemy"),
        "planner": _version("planner"),
    }


def bench_one(workdir: Path, rows: int, keep: bool) -> BenchResult:
    csv_path = workdir / f"azure_llm_{rows}.csv"
    db_path = workdir / f"ingest_{rows}.db"
    print(f"[{rows:,} rows] generating {csv_path} ...", flush=True)
    began = time.perf_counter()
    generate_csv(csv_path, rows)
    generate_seconds = time.perf_counter() - began
    file_bytes = csv_path.stat().st_size
    print(
        f"[{rows:,} rows] generated {file_bytes / MIB:,.1f} MiB in {generate_seconds:.1f} s; "
        "ingesting in a child process ...",
        flush=True,
    )
    try:
        report, sampled = ingest_in_child(csv_path, db_path)
        if report["rows"] != rows:
            raise RuntimeError(f"ingested {report['rows']} rows of {rows}")
        result = BenchResult(
            rows=rows,
            file_bytes=file_bytes,
            generate_seconds=generate_seconds,
            ingest_seconds=report["seconds"],
            child_seconds=report["child_seconds"],
            rows_per_second=rows / report["seconds"],
            peak_rss_bytes=report["peak_rss_bytes"],
            sampled_peak_rss_bytes=sampled,
            db_bytes=db_size(db_path),
        )
    finally:
        if not keep:
            for path in (csv_path, db_path, *workdir.glob(f"{db_path.name}-*")):
                path.unlink(missing_ok=True)
    print(
        f"[{rows:,} rows] ingested in {result.ingest_seconds:.1f} s "
        f"({result.rows_per_second:,.0f} rows/s), peak RSS {result.peak_rss_bytes / MIB:,.0f} MiB",
        flush=True,
    )
    return result


def check_targets(results: list[BenchResult]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for r in results:
        checks.append(
            {
                "target": f"{r.rows:,} rows: >= {TARGET_ROWS_PER_SECOND:,} rows/s",
                "value": round(r.rows_per_second),
                "met": r.rows_per_second >= TARGET_ROWS_PER_SECOND,
            }
        )
        if r.rows == TARGET_PEAK_RSS_ROWS:
            checks.append(
                {
                    "target": f"{r.rows:,} rows: peak RSS < {TARGET_PEAK_RSS_BYTES / MIB:,.0f} MiB",
                    "value": round(r.peak_rss_bytes / MIB),
                    "met": r.peak_rss_bytes < TARGET_PEAK_RSS_BYTES,
                }
            )
    return checks


def print_table(results: list[BenchResult], checks: list[dict[str, Any]]) -> None:
    header = (
        f"{'rows':>12} {'file MiB':>9} {'seconds':>8} {'rows/s':>10} "
        f"{'peak RSS MiB':>13} {'sampled MiB':>12} {'DB MiB':>8}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        sampled = (
            f"{r.sampled_peak_rss_bytes / MIB:,.0f}"
            if r.sampled_peak_rss_bytes is not None
            else "-"
        )
        print(
            f"{r.rows:>12,} {r.file_bytes / MIB:>9,.1f} {r.ingest_seconds:>8.1f} "
            f"{r.rows_per_second:>10,.0f} {r.peak_rss_bytes / MIB:>13,.0f} {sampled:>12} "
            f"{r.db_bytes / MIB:>8,.1f}"
        )
    print()
    for check in checks:
        verdict = "met" if check["met"] else "MISSED"
        print(f"target {check['target']}: {verdict} ({check['value']:,})")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=list(DEFAULT_ROWS),
        help="row counts to benchmark (default: 1000000 10000000)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="folder for the CSV and DB files (default: temp)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated CSV and DB files")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write results here")
    parser.add_argument("--child", nargs=2, metavar=("CSV", "DB"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        csv_path, db_path = (Path(p) for p in args.child)
        print(json.dumps(run_child(csv_path, db_path)), flush=True)
        return 0

    made_workdir = args.workdir is None
    workdir: Path = Path(tempfile.mkdtemp(prefix="ingest-bench-")) if made_workdir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    print(
        f"machine: {machine['cpu_model']}, {machine['cpu_count']} CPUs, "
        f"{(machine['ram_bytes'] or 0) / (1 << 30):.1f} GiB RAM; python {machine['python']}, "
        f"sqlite {machine['sqlite']}",
        flush=True,
    )
    try:
        results = [bench_one(workdir, rows, args.keep) for rows in args.rows]
    finally:
        if made_workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    checks = check_targets(results)
    print_table(results, checks)
    if args.json is not None:
        payload = {
            "benchmark": "ingest-csv-sqlite",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine,
            "results": [asdict(r) for r in results],
            "targets": checks,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    if args.keep:
        print(f"kept files in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
