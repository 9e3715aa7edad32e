"""A hostile user's sweep over the ``planner`` command: every input a user can type or hand it.

    python tests/hostile/sweep.py [--jobs 2] [--only SUBSTRING] [--verbose]

Each case runs the installed command as a user would, in a copy of a prepared store (the demo
sample ingested, the bundled prices loaded), with a memory cap and a time limit, and is judged:

- ``crash``: exit 70 (an internal error), a traceback, or death by a signal;
- ``runaway``: past its time limit or its memory cap;
- ``silent``: exit 0 where the input is wrong (a wrong value would be stored or printed);
- ``leak``: a secret of the input appears in the output;
- ``clobbered``: a file a link points to was replaced;
- ``raw``: a control character of the input echoed raw, or an error message over 4 kB;
- ``clean`` otherwise: a clear error (non-zero exit, one message) or a correct result.

Beside the hand-written cases, ``--generated`` (the default) walks the command tree and gives
every option that takes a value the values a hostile user types: NaN, infinity, a negative
number, 1e308, a number with a wrong unit and 100,000 characters of text, each after a base
invocation that is valid, so the option's own check is what answers. ``--no-generated`` runs the
hand-written cases only.

Not a pytest module (the sweep takes minutes); the findings it made are each covered by a test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
PLANNER = str(Path(sys.executable).parent / "planner")
SAMPLE = ROOT / "data" / "samples" / "azure_llm_conv_2023.csv.gz"
SERVEGEN = ROOT / "data" / "samples" / "servegen_rates_10min.csv"
MEMORY_CAP = 4 << 30  # bytes of address space per case
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
GOOD_ROW = "2023-11-16 18:15:46.6805900,374,44\n"
SECRET = "s3cr3t-Pa55"
ESC = "\x1b[31m"
INTACT_BYTES = b"a file a link points to: never to be replaced\n"

SIM = ["simulate", "--dataset", "demo", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"]
LAT = ["latency", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"]
REC = ["recommend", "--dataset", "demo", "--model", "llama-3.1-8b", "--slo-ttft-p99", "2s"]
FC = ["forecast", "--series", str(SERVEGEN), "--model", "m-small", "--no-backtest"]


@dataclass
class Case:
    name: str
    args: list[str]
    expect: str = "error"  # "error": the input is wrong; "ok": it is fine; "any": either
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    secret: str | None = None
    intact: Path | None = None  # a file the case must leave byte for byte as it was


@dataclass
class Outcome:
    case: Case
    verdict: str
    code: int | None
    seconds: float
    detail: str


def files(folder: Path) -> dict[str, Path]:
    """The hostile input files, written into ``folder``."""
    made: dict[str, Path] = {}

    def text(name: str, content: str | bytes) -> None:
        path = folder / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        made[name] = path

    text("bom.csv", "\ufeff" + AZURE_HEADER + GOOD_ROW * 3)
    text("semicolon.csv", AZURE_HEADER.replace(",", ";") + GOOD_ROW.replace(",", ";") * 3)
    text("tab.csv", AZURE_HEADER.replace(",", "\t") + GOOD_ROW.replace(",", "\t") * 3)
    text("hex-tokens.csv", AZURE_HEADER + "2023-11-16 18:15:46,0x10,44\n")
    text("float-tokens.csv", AZURE_HEADER + "2023-11-16 18:15:46,10.5,44\n")
    text("negative-tokens.csv", AZURE_HEADER + "2023-11-16 18:15:46,-3,44\n")
    text("nan-tokens.csv", AZURE_HEADER + "2023-11-16 18:15:46,nan,44\n")
    text("huge-tokens.csv", AZURE_HEADER + "2023-11-16 18:15:46,99999999999999999999999,44\n")
    text("year-9999.csv", AZURE_HEADER + GOOD_ROW + "9999-12-31 00:00:00,10,5\n")
    text("year-0001.csv", AZURE_HEADER + "0001-01-01 00:00:00,10,5\n" + GOOD_ROW)
    text("non-utf8.csv", AZURE_HEADER.encode() + b"2023-11-16 18:15:46,1\xff0,44\n")
    text("empty.csv", "")
    text("header-only.csv", AZURE_HEADER)
    text("binary.csv", bytes(range(256)) * 8)
    text("not-gzip.csv.gz", AZURE_HEADER + GOOD_ROW)
    text("ansi-model.csv", "ts,in,out,model\n1,10,5," + ESC + "red\n")
    text("nul-model.csv", "ts,in,out,model\n1,10,5,a\x00b\n")
    text("long-line.csv", AZURE_HEADER + "2023-11-16 18:15:46," + "1" * 2_000_000 + ",4\n")
    big_relative = '{"timestamp": 18446744073709552, "input_length": 10, "output_length": 5}\n'
    text("huge-relative.jsonl", big_relative)
    text("deep.jsonl", '{"timestamp": 1, "input_length": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    text("bom.jsonl", '\ufeff{"timestamp": 1, "input_length": 10, "output_length": 5}\n')
    text(
        "overflow-hash.jsonl",
        '{"timestamp": 1, "input_length": 10, "output_length": 5, '
        '"hash_ids": [99999999999999999999]}\n',
    )
    text("ns-epochs.csv", "ts,in,out\n1700000000000000000,10,5\n1700000001000000000,10,5\n")
    text("gz-jsonl.jsonl.gz", gzip.compress(b'{"timestamp": 1, "input_length": 1}\n'))
    pq.write_table(
        pa.table(
            {
                "TIMESTAMP": ["2023-11-16 18:15:46"],
                "ContextTokens": [True],
                "GeneratedTokens": [False],
            }
        ),
        folder / "bool.parquet",
    )
    made["bool.parquet"] = folder / "bool.parquet"
    pq.write_table(
        pa.table(
            {
                "TIMESTAMP": pa.array([253402214400_000000], pa.timestamp("us")),
                "ContextTokens": [10],
                "GeneratedTokens": [5],
            }
        ),
        folder / "year-9999.parquet",
    )
    made["year-9999.parquet"] = folder / "year-9999.parquet"
    pq.write_table(
        pa.table(
            {
                "TIMESTAMP": ["2023-11-16 18:15:46"],
                "ContextTokens": pa.array([2**64 - 1], pa.uint64()),
                "GeneratedTokens": [5],
            }
        ),
        folder / "uint64.parquet",
    )
    made["uint64.parquet"] = folder / "uint64.parquet"

    price_header = (
        "provider,region,instance_type,gpu_model,gpu_count,purchase_option,usd_per_hour\n"
    )
    text(
        "price-comma.csv", price_header + 'aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,"1,09"\n'
    )
    text(
        "price-tiny.csv", price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,0.00001\n"
    )
    text("price-huge.csv", price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,9000\n")
    text("price-negative.csv", price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,-1\n")
    text("price-inf.csv", price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,inf\n")
    text("price-nul.csv", price_header + "aws,us-east-1,p5\x00x,H100-SXM,8,on-demand,50\n")
    text("price-long.csv", price_header + f"aws,us-east-1,{'p' * 300},H100-SXM,8,on-demand,50\n")
    text("price-ok.csv", price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,50.1\n")
    text(
        "price-bom.csv",
        "\ufeff" + price_header + "aws,us-east-1,p5.48xlarge,H100-SXM,8,on-demand,50.2\n",
    )
    text("price-header-only.csv", price_header)
    text("price-binary.xlsx", bytes(range(256)) * 4)
    _far_cell_xlsx(folder / "far-cell.xlsx")
    made["far-cell.xlsx"] = folder / "far-cell.xlsx"

    cal_header = (
        "model,gpu,num_gpus,precision,input_len,output_len,batch_or_concurrency,metric,value,unit\n"
    )
    text("cal-negative.csv", cal_header + "Llama-2-7B,H100 SXM 80GB,1,FP8,-1,1,1,TTFT,7.0,ms\n")
    text("cal-inf.csv", cal_header + "Llama-2-7B,H100 SXM 80GB,1,FP8,128,1,1,TTFT,inf,ms\n")
    text("cal-zero.csv", cal_header + "Llama-2-7B,H100 SXM 80GB,1,FP8,128,1,1,TTFT,0,ms\n")
    text("cal-empty.csv", "")

    text("series-9999.csv", "ds,y\n9999-12-31 00:00,5\n9999-12-31 01:00,5\n")
    text("series-0001.csv", "ds,y\n0001-01-01 00:00,5\n0001-01-01 01:00,5\n")
    text("series-nan.csv", "ds,y\n2025-01-01 00:00,nan\n2025-01-01 01:00,inf\n")
    text("series-negative.csv", "ds,y\n2025-01-01 00:00,-5\n2025-01-01 01:00,3\n")
    text("series-one.csv", "ds,y\n2025-01-01 00:00,5\n")
    trust_files(folder, text)
    text("demand-zero.csv", "ds,y\n" + "".join(f"2025-01-01 {h:02d}:00,0\n" for h in range(24)))
    return made


def trust_files(folder: Path, text: Callable[[str, str | bytes], None]) -> None:
    """Issue 30's inputs: links, formulas, look-alike names, absurd numbers, deep nesting."""
    victim = folder / "victim.txt"
    victim.write_bytes(INTACT_BYTES)
    for link in ("link.csv", "link.html"):
        (folder / link).symlink_to(victim)
    header = "provider,region,instance_type,gpu_model,gpu_count,purchase_option,usd_per_hour\n"
    row = "aws,{region},{instance},H100-SXM,8,on-demand,50\n"
    for name, region, instance in (
        ("price-formula.csv", "us-east-1", '"=HYPERLINK(""http://x""&A1;""x"")"'),
        ("price-at.csv", "us-east-1", "@SUM(1)"),
        ("price-plus.csv", "us-east-1", "+cmd|' /C calc'!A0"),
        ("price-lookalike-region.csv", "us\u2010east\u20101", "p5.48xlarge"),
    ):
        text(name, header + row.format(region=region, instance=instance))
    # GCP exports: the bundled fixture with its second row's cost or credits made absurd
    gcp_lines = (ROOT / "tests/fixtures/actuals/gcp/billing_export.csv").read_text().splitlines()
    row = gcp_lines[2]
    for name, edited in (
        ("gcp-deep.csv", row.replace(",[],", f',"{"[" * 50_000}{"]" * 50_000}",')),
        ("gcp-huge-cost.csv", row.replace(",600.5,", ",1e308,")),
        ("gcp-negative-cost.csv", row.replace(",600.5,", ",-1e12,")),
    ):
        assert edited != row, name
        text(name, "\n".join([gcp_lines[0], gcp_lines[1], edited, *gcp_lines[3:]]) + "\n")
    vllm = json.loads(
        (ROOT / "tests/fixtures/bench-results/vllm-bench-serve_catalog-metadata.json").read_text()
    )
    for name, value in (("vllm-ttft-1e308.json", 1e308), ("vllm-ttft-nan.json", float("nan"))):
        text(name, json.dumps({**vllm, "mean_ttft_ms": value}))
    text("mixed-offsets.csv", AZURE_HEADER + "2023-11-16T18:15:46+02:00,374,44\n" + GOOD_ROW)
    text("epoch-1916.csv", "ts,in,out\n-1700000000,10,5\n-1699999999,10,5\n")
    text("wide-header.csv", ",".join(f"c{i}" for i in range(10_000_000)) + "\n1,2,3\n")


def _far_cell_xlsx(path: Path) -> None:
    """A tiny workbook whose one cell sits at XFD1048576 (the last cell a sheet can have)."""
    from openpyxl import Workbook  # type: ignore[import-untyped]

    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(
        [
            "provider",
            "region",
            "instance_type",
            "gpu_model",
            "gpu_count",
            "purchase_option",
            "usd_per_hour",
        ]
    )
    sheet["XFD1048576"] = 1
    book.save(path)


def cases(f: dict[str, Path], tmp: Path) -> list[Case]:
    p = {k: str(v) for k, v in f.items()}
    pg = "postgresql+psycopg://u:{}@127.0.0.1:1/db"
    out: list[Case] = []
    add = out.append

    # --- ingest: values that must never be stored silently --------------------------------
    for name in (
        "hex-tokens.csv",
        "float-tokens.csv",
        "negative-tokens.csv",
        "nan-tokens.csv",
        "huge-tokens.csv",
        "year-9999.csv",
        "year-0001.csv",
        "non-utf8.csv",
        "empty.csv",
        "header-only.csv",
        "binary.csv",
        "long-line.csv",
        "bool.parquet",
        "year-9999.parquet",
        "uint64.parquet",
        "overflow-hash.jsonl",
        "gz-jsonl.jsonl.gz",
    ):
        add(Case(f"ingest {name}", ["ingest", p[name]]))
    add(
        Case(
            "ingest huge relative",
            ["ingest", p["huge-relative.jsonl"], "--start", "2024-01-01T00:00:00Z"],
        )
    )
    add(Case("ingest deep json", ["ingest", p["deep.jsonl"], "--start", "2024-01-01T00:00:00Z"]))
    add(
        Case(
            "ingest deep json skip",
            ["ingest", p["deep.jsonl"], "--start", "2024-01-01T00:00:00Z", "--on-error", "skip"],
            "any",
        )
    )
    add(Case("ingest year-9999 skip", ["ingest", p["year-9999.csv"], "--on-error", "skip"], "ok"))
    add(Case("ingest non-utf8 skip", ["ingest", p["non-utf8.csv"], "--on-error", "skip"], "any"))
    add(Case("ingest bom csv", ["ingest", p["bom.csv"]], "ok"))
    # gzip is recognised by content: a plain CSV named .gz is read as the CSV it is
    add(Case("ingest not-gzip.csv.gz", ["ingest", p["not-gzip.csv.gz"]], "ok"))
    add(
        Case(
            "ingest bom jsonl", ["ingest", p["bom.jsonl"], "--start", "2024-01-01T00:00:00Z"], "ok"
        )
    )
    add(Case("ingest semicolon", ["ingest", p["semicolon.csv"]], "any"))
    add(Case("ingest tab", ["ingest", p["tab.csv"]], "any"))
    generic = ["--map", "arrival=ts", "--map", "input_tokens=in", "--map", "output_tokens=out"]
    add(
        Case(
            "ingest ns epochs as s",
            ["ingest", p["ns-epochs.csv"], *generic, "--time-kind", "epoch", "--time-unit", "s"],
        )
    )
    add(
        Case(
            "ingest ns epochs as ns",
            ["ingest", p["ns-epochs.csv"], *generic, "--time-kind", "epoch", "--time-unit", "ns"],
            "ok",
        )
    )
    add(
        Case(
            "ingest ansi model",
            [
                "ingest",
                p["ansi-model.csv"],
                *generic,
                "--map",
                "model=model",
                "--time-kind",
                "relative",
                "--start",
                "2024-01-01T00:00:00Z",
            ],
            "any",
        )
    )
    add(
        Case(
            "ingest nul model",
            [
                "ingest",
                p["nul-model.csv"],
                *generic,
                "--map",
                "model=model",
                "--time-kind",
                "relative",
                "--start",
                "2024-01-01T00:00:00Z",
            ],
        )
    )
    add(
        Case(
            "ingest start 9999",
            ["ingest", p["huge-relative.jsonl"], "--start", "9999-12-31T00:00:00Z"],
        )
    )
    add(Case("ingest start 0001", ["ingest", p["bom.jsonl"], "--start", "0001-01-01T00:00:00Z"]))
    add(
        Case(
            "ingest bad timezone",
            ["ingest", str(SAMPLE), "--timezone", "Mars/Olympus", "--name", "tz"],
        )
    )
    add(
        Case(
            "ingest bad time format", ["ingest", str(SAMPLE), "--time-format", "%Q", "--name", "tf"]
        )
    )
    add(Case("ingest ansi name", ["ingest", str(SAMPLE), "--name", f"a{ESC}b"]))
    add(Case("ingest newline name", ["ingest", str(SAMPLE), "--name", "a\nb"]))
    add(Case("ingest long name", ["ingest", str(SAMPLE), "--name", "n" * 300]))
    add(Case("ingest empty name", ["ingest", str(SAMPLE), "--name", ""]))
    add(Case("ingest directory", ["ingest", str(tmp)]))
    add(Case("ingest dev null", ["ingest", "/dev/null"]))
    add(Case("ingest missing", ["ingest", str(tmp / "missing.csv")]))
    add(Case("ingest same again", ["ingest", str(SAMPLE), "--name", "demo"], "ok"))
    add(Case("datasets show ansi", ["datasets", "show", f"x{ESC}y"]))
    add(Case("datasets delete missing", ["datasets", "delete", "nope", "--yes"]))

    # --- prices ----------------------------------------------------------------------------
    for name in (
        "price-comma.csv",
        "price-tiny.csv",
        "price-huge.csv",
        "price-negative.csv",
        "price-inf.csv",
        "price-nul.csv",
        "price-long.csv",
        "price-header-only.csv",
        "price-binary.xlsx",
        "far-cell.xlsx",
        "empty.csv",
    ):
        add(Case(f"prices import {name}", ["prices", "import", p[name]], timeout=60))
    add(Case("prices import ok", ["prices", "import", p["price-ok.csv"]], "ok"))
    add(Case("prices import bom", ["prices", "import", p["price-bom.csv"]], "ok"))
    add(
        Case(
            "prices import comma told",
            ["prices", "import", p["price-comma.csv"], "--decimal-comma"],
            "any",
        )
    )
    add(Case("prices list unknown gpu", ["prices", "list", "--gpu", "nope"]))
    add(Case("prices compare unknown gpu", ["prices", "compare", "--gpu", "nope"]))
    add(Case("prices list unknown provider", ["prices", "list", "--provider", "ibm"]))
    add(Case("prices diff unknown", ["prices", "diff", "999", "998"]))

    # --- store and secrets -----------------------------------------------------------------
    for label, url in (
        ("query password", f"postgresql+psycopg://127.0.0.1:1/db?user=u&password={SECRET}"),
        ("at in password", f"postgresql+psycopg://u:{SECRET}@x@127.0.0.1:1/db"),
        ("plain password", pg.format(SECRET)),
        ("unparseable", f"postgresql+psycopg://u:{SECRET}@127.0.0.1:notaport/db"),
    ):
        add(Case(f"db status {label}", ["--db", url, "db", "status"], secret=SECRET, timeout=60))
        add(
            Case(
                f"datasets list {label}",
                ["--db", url, "datasets", "list"],
                secret=SECRET,
                timeout=60,
            )
        )
    add(
        Case(
            "db env password",
            ["db", "status"],
            env={"PLANNER_DATABASE_URL": pg.format(SECRET)},
            secret=SECRET,
        )
    )
    add(Case("db not a database", ["--db", f"sqlite:///{p['binary.csv']}", "datasets", "list"]))
    add(Case("db folder", ["--db", f"sqlite:///{tmp}", "datasets", "list"]))
    add(Case("db proc", ["--db", "sqlite:////proc/planner.db", "datasets", "list"]))
    add(Case("db unknown dialect", ["--db", "nosuchdb://x/y", "datasets", "list"]))
    add(Case("db mysql", ["--db", "mysql://u:p@127.0.0.1:1/db", "datasets", "list"], secret=None))
    add(Case("home is a file", ["datasets", "list"], env={"PLANNER_HOME": p["empty.csv"]}))

    # --- latency and calibrate -------------------------------------------------------------
    # A load beyond capacity is a result (saturated, the capacity, what would serve it).
    add(Case("latency qps above capacity", [*LAT, "--qps", "100000"], "ok"))
    add(Case("latency qps above capacity json", [*LAT, "--qps", "1e300", "--json"], "ok"))
    add(Case("latency static batch", [*LAT, "--batch", "8", "--static"], "ok"))
    add(Case("latency qps percentiles", [*LAT, "--qps", "5"], "ok"))
    add(Case("latency sim max", [*LAT, "--qps", "5", "--sim-requests", "200000"], "ok"))
    add(
        Case("latency engine vllm", [*LAT, "--engine", "vllm", "--profile", "trtllm-default"], "ok")
    )
    add(Case("latency engine alias", [*LAT, "--engine", "TensorRT-LLM"], "ok"))
    add(Case("latency engine escape", [*LAT, "--engine", f"v{ESC}llm"]))
    add(Case("latency engine empty", [*LAT, "--engine", ""]))
    add(Case("latency engine huge", [*LAT, "--engine", "x" * 100_000]))
    add(Case("latency static under load", [*LAT, "--static", "--qps", "2"]))
    add(
        Case(
            "latency memory too low",
            [
                "latency",
                "--gpu",
                "L4",
                "--model",
                "llama-3.1-8b",
                "--gpu-memory-utilization",
                "0.3",
            ],
            "any",
        )
    )
    for value in ("nan", "inf", "-inf", "0", "0.09", "1.01", "1e308", "-0", "abc"):
        add(Case(f"latency mem util {value}", [*LAT, "--gpu-memory-utilization", value]))
    add(
        Case(
            "latency mem util alias clash",
            [*LAT, "--gpu-memory-utilization", "0.5", "--memory-utilization", "0.6"],
        )
    )
    for value in ("-1", "1", "99", "200001", "1" + "0" * 40):
        add(Case(f"latency sim-requests {value}", [*LAT, "--qps", "5", "--sim-requests", value]))
    for value in ("fp4", "", ESC, "FP8 "):
        expect = "ok" if value == "FP8 " else "error"
        add(Case(f"latency kv-cache {value!r}", [*LAT, "--kv-cache", value], expect))
    add(Case("latency catalog engines", ["catalog", "engines"], "ok"))
    add(Case("latency catalog engines json", ["catalog", "engines", "--json"], "ok"))
    for option, value in (
        ("--engine", "vlm"),
        ("--gpu-memory-utilization", "2"),
        ("--kv-cache", "int8"),
    ):
        add(Case(f"latency-sim {option} {value}", [*SIM, option, value, "-q"]))
        add(Case(f"latency-rec {option} {value}", [*REC, option, value, "-q"]))
    add(Case("latency huge batch", [*LAT, "--batch", "1000000"]))
    add(
        Case(
            "latency input over context",
            ["latency", "--gpu", "H100-SXM", "--model", "llama-2-7b", "--input", "30000"],
        )
    )
    for option, value in (
        ("--batch", "0"),
        ("--input", "-1"),
        ("--output", "0"),
        ("--qps", "nan"),
        ("--qps", "-1"),
        ("--tp", "3"),
        ("--tp", "0"),
    ):
        add(Case(f"latency {option} {value}", [*LAT, option, value]))
    add(Case("latency unknown gpu", ["latency", "--gpu", f"H{ESC}100", "--model", "llama-3.1-8b"]))
    add(Case("latency ok", LAT, "ok"))
    for name in ("cal-negative.csv", "cal-inf.csv", "cal-zero.csv", "cal-empty.csv", "binary.csv"):
        add(Case(f"calibrate {name}", ["calibrate", p[name], "--name", "x"]))
    add(
        Case(
            "calibrate holdout 2",
            [
                "calibrate",
                str(ROOT / "data/reference/published_latency.csv"),
                "--name",
                "x",
                "--holdout",
                "2",
            ],
        )
    )

    # --- simulate --------------------------------------------------------------------------
    for option, value in (
        ("--load-scale", "1e9"),
        ("--load-scale", "nan"),
        ("--load-scale", "-1"),
        ("--load-scale", "0"),
        ("--replicas", "1000000"),  # over one replica per 100 of --max-requests
        ("--replicas", "0"),
        ("--max-seqs", "0"),
        ("--tp", "3"),
        ("--slo-ttft", "abc"),
        ("--slo-ttft", "-1s"),
        ("--slo-tpot", "0s"),
        ("--price-per-hour", "inf"),
        ("--price-per-hour", "-4"),
        ("--start", "9999-12-31T00:00:00Z"),
        ("--cold-start", "forever"),
        ("--spot-interruptions-per-hour", "nan"),
        ("--prefix-hit-rate", "2"),
        ("--cv", "-1"),
        ("--schedule", "1,a,3"),
        ("--router", "nope"),
        ("--precision", "fp3"),
        ("--kv-cache", "fp1"),
    ):
        add(Case(f"simulate {option} {value}", [*SIM, option, value], timeout=180))
    for option in ("--out-requests", "--out-timeline", "--out-summary"):
        add(Case(f"simulate {option} missing folder", [*SIM, option, str(tmp / "no" / "x.csv")]))
        add(Case(f"simulate {option} /proc", [*SIM, option, "/proc/x.csv"]))
        add(Case(f"simulate {option} folder", [*SIM, option, str(tmp)]))
    add(
        Case(
            "simulate unknown dataset",
            ["simulate", "--dataset", "nope", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"],
        )
    )
    rates = ["--tokens-from", "demo", "--gpu", "H100-SXM", "--model", "llama-3.1-8b"]
    for label, name in (
        ("9999", "series-9999.csv"),
        ("nan", "series-nan.csv"),
        ("negative", "series-negative.csv"),
    ):
        add(Case(f"simulate rates {label}", ["simulate", "--rates", p[name], *rates]))
    add(Case("simulate ok", [*SIM, "--load-scale", "0.2", "--json"], "ok", timeout=180))

    # --- forecast --------------------------------------------------------------------------
    for name in (
        "series-9999.csv",
        "series-0001.csv",
        "series-nan.csv",
        "series-one.csv",
        "empty.csv",
        "binary.csv",
    ):
        add(Case(f"forecast {name}", ["forecast", "--series", p[name], "--no-backtest"]))
    for option, value in (
        ("--horizon", "100000d"),
        ("--horizon", "2600w"),
        ("--horizon", "0h"),
        ("--horizon", "-5d"),
        ("--quantile", "1.5"),
        ("--quantile", "nan"),
        ("--cap", "-1"),
        ("--holidays", "XX"),
    ):
        add(Case(f"forecast {option} {value}", [*FC, option, value], timeout=180))
    for option in ("--demand-out", "--plot"):
        add(
            Case(
                f"forecast {option} missing folder",
                [*FC, option, str(tmp / "no" / "x.csv")],
                timeout=180,
            )
        )
        add(Case(f"forecast {option} /proc", [*FC, option, "/proc/x.csv"], timeout=180))
    add(Case("forecast unknown dataset", ["forecast", "--dataset", "nope"]))
    add(
        Case("forecast unknown model", ["forecast", "--series", str(SERVEGEN), "--model", "m-huge"])
    )

    # --- recommend -------------------------------------------------------------------------
    for option, value in (
        ("--tp", "3"),
        ("--load-scale", "1e9"),
        ("--load-scale", "nan"),
        ("--budget", "-5"),
        ("--max-spot-share", "2"),
        ("--min-attainment", "1.5"),
        ("--gpu", "nope"),
        ("--provider", "ibm"),
        ("--slo-ttft-p99", "0s"),
    ):
        add(Case(f"recommend {option} {value}", [*REC, option, value], timeout=300))
    for option in ("--out", "--plot"):
        add(Case(f"recommend {option} missing folder", [*REC, option, str(tmp / "no" / "x.json")]))
        add(Case(f"recommend {option} /proc", [*REC, option, "/proc/x.json"]))
    add(
        Case(
            "recommend demand zero",
            [
                "recommend",
                "--demand",
                p["demand-zero.csv"],
                "--tokens-from",
                "demo",
                "--model",
                "llama-3.1-8b",
                "--slo-ttft-p99",
                "2s",
            ],
            "any",
            timeout=300,
        )
    )
    add(Case("recommendations show missing", ["recommendations", "show", "999"]))
    add(Case("recommendations show text", ["recommendations", "show", "abc"]))
    out.extend(trust_cases(f, tmp))
    return out


# A valid invocation of each command, fast to run, which a generated option is appended to (the
# last occurrence of an option wins); commands absent here are not swept option by option.
BENCH_RESULT = (
    ROOT / "tests" / "fixtures" / "bench-results" / "vllm-bench-serve_catalog-metadata.json"
)
CLOSED_URL = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection fails at once
BASES: dict[str, list[str]] = {
    "ingest": ["ingest", str(SAMPLE), "--name", "swept"],
    "latency": LAT,
    "simulate": [*SIM, "--load-scale", "0.05"],
    "forecast": FC,
    "recommend": [*REC, "--load-scale", "0.05", "--verify-top", "1"],
    "dashboard": ["dashboard", "--dry-run"],
    "report": ["report", "--recommendation", "1", "--out", "{tmp}/r.csv"],
    "bench run": ["bench", "run", "--url", CLOSED_URL, "--requests", "2", "--no-store"],
    "bench import": ["bench", "import", str(BENCH_RESULT), "--no-store"],
    "prices list": ["prices", "list"],
    "prices compare": ["prices", "compare", "--gpu", "H100"],
    "datasets list": ["datasets", "list"],
    "recommendations list": ["recommendations", "list"],
}
# Values that are never a number of anything: refused wherever a number is asked for.
NOT_NUMBERS = ("nan", "inf", "3parsecs", "9" * 100_000)
# Values a number option may or may not accept (judged for crashes, runaways and raw echoes).
ODD_NUMBERS = ("-1", "1e308")
LONG_TEXT = "x" * 100_000
NUMBER_METAVARS = ("<int", "<float", "INTEGER", "FLOAT")


def _leaf_commands() -> dict[str, list[tuple[str, str]]]:
    """Every command's options that take a value, with the metavar its help shows."""
    import typer

    from planner.cli import app

    found: dict[str, list[tuple[str, str]]] = {}

    def walk(command: object, path: list[str]) -> None:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                walk(command.get_command(None, name), [*path, name])  # type: ignore[attr-defined]
            return
        options = []
        for param in command.params:  # type: ignore[attr-defined]
            if param.param_type_name != "option" or param.is_flag or param.count:
                continue
            metavar = param.metavar or param.display_type(None)
            options.append((param.opts[0], str(metavar)))
        found[" ".join(path)] = options

    walk(typer.main.get_command(app), [])
    return found


def option_cases(tmp: Path) -> list[Case]:
    """Every option of every command in ``BASES`` with the values of ``NOT_NUMBERS``,
    ``ODD_NUMBERS`` (number options) and ``LONG_TEXT`` (every option)."""
    out: list[Case] = []
    for command, options in _leaf_commands().items():
        base = BASES.get(command)
        if base is None:
            continue
        base = [a.replace("{tmp}", str(tmp)) for a in base]
        for option, metavar in options:
            if option in ("--db",):
                continue  # the store's URL: swept with secrets above
            numeric = any(m in metavar for m in NUMBER_METAVARS)
            values = [*NOT_NUMBERS, *ODD_NUMBERS] if numeric else [LONG_TEXT]
            for value in values:
                expect = "error" if numeric and value in NOT_NUMBERS else "any"
                shown = value if len(value) < 20 else f"<{len(value):,} chars>"
                out.append(
                    Case(
                        f"opt {command} {option} {shown}",
                        [*base, option, value],
                        expect,
                        timeout=90,
                    )
                )
    return out


def trust_cases(f: dict[str, Path], tmp: Path) -> list[Case]:
    """Issue 30's cases: secrets, links, formulas, unbounded reads, absurd values."""
    p = {k: str(v) for k, v in f.items()}
    out: list[Case] = []
    add = out.append
    pg = f"postgresql+psycopg://planner:{SECRET}@127.0.0.1:1/db"
    add(
        Case(
            "dashboard dry-run password",
            ["--db", pg, "dashboard", "--dry-run"],
            "any",
            secret=SECRET,
        )
    )
    add(
        Case(
            "dashboard env password",
            ["dashboard", "--dry-run"],
            "any",
            env={"PLANNER_DATABASE_URL": pg},
            secret=SECRET,
        )
    )
    for label, url in (
        ("userinfo", f"http://user:{SECRET}@127.0.0.1:9"),
        ("query key", f"http://127.0.0.1:9/?api_key={SECRET}"),
    ):
        add(
            Case(
                f"bench run url {label}",
                ["bench", "run", "--url", url, "--requests", "1", "--no-store"],
                "any",
                secret=SECRET,
                timeout=60,
            )
        )
    add(
        Case(
            "bench run api key env",
            ["bench", "run", "--url", CLOSED_URL, "--requests", "1", "--no-store"],
            "any",
            env={"OPENAI_API_KEY": SECRET},
            secret=SECRET,
            timeout=60,
        )
    )
    add(
        Case(
            "bench run api key option",
            [
                "bench",
                "run",
                "--url",
                CLOSED_URL,
                "--requests",
                "1",
                "--no-store",
                "--api-key",
                SECRET,
            ],
            "any",
            secret=SECRET,
            timeout=60,
        )
    )
    for host in ("127.1", "127.0.0.2", "::1", "localhost"):
        add(Case(f"dashboard host {host}", ["dashboard", "--dry-run", "--host", host], "ok"))
    # links: the file a link points to is never replaced
    for label, args in (
        ("report --out", ["report", "--recommendation", "1", "--out", str(tmp / "link.csv")]),
        (
            "simulate --out-requests",
            [*SIM, "--load-scale", "0.05", "--out-requests", str(tmp / "link.csv")],
        ),
        ("forecast --plot", [*FC, "--plot", str(tmp / "link.html")]),
        ("forecast --demand-out", [*FC, "--demand-out", str(tmp / "link.csv")]),
        (
            "bench import --out-csv",
            [
                "bench",
                "import",
                str(BENCH_RESULT),
                "--no-store",
                "--out-csv",
                str(tmp / "link.csv"),
            ],
        ),
    ):
        add(Case(f"link {label}", args, timeout=180, intact=tmp / "victim.txt"))
    for name in (
        "price-formula.csv",
        "price-at.csv",
        "price-plus.csv",
        "price-lookalike-region.csv",
    ):
        add(Case(f"prices import {name}", ["prices", "import", p[name]]))
    add(
        Case(
            "report first-month 9999-12",
            [
                "report",
                "--recommendation",
                "1",
                "--out",
                str(tmp / "r.csv"),
                "--first-month",
                "9999-12",
            ],
        )
    )
    for name in ("gcp-deep.csv", "gcp-huge-cost.csv", "gcp-negative-cost.csv"):
        add(
            Case(
                f"report actuals {name}",
                [
                    "report",
                    "--recommendation",
                    "1",
                    "--out",
                    str(tmp / "r.xlsx"),
                    "--actuals-gcp",
                    p[name],
                ],
            )
        )
    for name in ("vllm-ttft-1e308.json", "vllm-ttft-nan.json"):
        add(Case(f"bench import {name}", ["bench", "import", p[name], "--no-store"]))
    add(
        Case(
            "bench import no metadata no-store",
            [
                "bench",
                "import",
                str(ROOT / "tests/fixtures/bench-results/vllm-bench-serve_no-metadata.json"),
                "--no-store",
            ],
            "ok",
        )
    )
    for name in ("mixed-offsets.csv", "epoch-1916.csv", "wide-header.csv"):
        extra = (
            [
                "--map",
                "arrival=ts",
                "--map",
                "input_tokens=in",
                "--map",
                "output_tokens=out",
                "--time-kind",
                "epoch",
            ]
            if name == "epoch-1916.csv"
            else []
        )
        add(Case(f"ingest {name}", ["ingest", p[name], *extra]))
    out.extend(option_cases(tmp))
    return out


def prepare(home: Path) -> None:
    env = {**os.environ, "PLANNER_HOME": str(home)}
    for args in (
        ["ingest", str(SAMPLE), "--name", "demo"],
        ["prices", "load-snapshot"],
        [*REC, "--load-scale", "0.05", "--verify-top", "1"],  # recommendation 1, for `report`
    ):
        subprocess.run([PLANNER, *args], env=env, check=True, capture_output=True)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_case(case: Case, base: Path, scratch: Path) -> Outcome:
    home = Path(tempfile.mkdtemp(dir=scratch))
    shutil.copytree(base, home, dirs_exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANNER_")}
    env.update({"PLANNER_HOME": str(home), "COLUMNS": "100"})
    env.update(case.env)  # a case may point PLANNER_HOME elsewhere
    started = time.monotonic()
    try:
        done = subprocess.run(
            [PLANNER, *case.args],
            env=env,
            capture_output=True,
            timeout=case.timeout,
            preexec_fn=_limit_memory,
            check=False,
            cwd=home,
        )
    except subprocess.TimeoutExpired:
        return Outcome(case, "runaway", None, case.timeout, f"over {case.timeout:.0f} s")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    seconds = time.monotonic() - started
    out = done.stdout.decode(errors="replace")
    err = done.stderr.decode(errors="replace")
    code = done.returncode
    first = (err.strip().splitlines() or [""])[-1][:160]
    if code == 70 or "Traceback" in err or code < 0 or code == 120:
        verdict = "runaway" if "MemoryError" in err or "out of memory" in err else "crash"
    elif case.intact is not None and case.intact.read_bytes() != INTACT_BYTES:
        verdict = "clobbered"
        case.intact.write_bytes(INTACT_BYTES)
    elif case.secret and case.secret in out + err:
        verdict = "leak"
    elif "\x1b[" in out + err or len(err) > 4096:
        verdict = "raw"
    elif case.expect == "error" and code == 0:
        verdict = "silent"
    elif case.expect == "ok" and code != 0:
        verdict = "crash" if code == 70 else "wrong-refusal"
    else:
        verdict = "clean"
    return Outcome(case, verdict, code, seconds, first)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument(
        "--generated",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also sweep every option of every command with hostile values",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="planner-sweep-") as scratch_name:
        scratch = Path(scratch_name)
        base = scratch / "base"
        prepare(base)
        inputs = scratch / "inputs"
        inputs.mkdir()
        todo = [
            c
            for c in cases(files(inputs), inputs)
            if args.only in c.name and (args.generated or not c.name.startswith("opt "))
        ]
        run: Callable[[Case], Outcome] = lambda c: run_case(c, base, scratch)  # noqa: E731
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(run, todo))
    counts = Counter(o.verdict for o in outcomes)
    for o in outcomes:
        if o.verdict != "clean" or args.verbose:
            print(f"{o.verdict:14} exit {o.code!s:4} {o.seconds:6.1f}s  {o.case.name}: {o.detail}")
    print(f"\n{len(outcomes)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "case": o.case.name,
                        "args": o.case.args,
                        "verdict": o.verdict,
                        "exit": o.code,
                        "seconds": round(o.seconds, 2),
                        "message": o.detail,
                    }
                    for o in outcomes
                ],
                indent=2,
            )
        )
    return 0 if counts.keys() <= {"clean"} else 1


if __name__ == "__main__":
    raise SystemExit(main())
