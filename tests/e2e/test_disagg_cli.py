"""Disaggregated serving as a user drives it: ``planner simulate`` with a prefill and a decode
pool (the roles, the transfer and the decode wait printed and in --json), ``planner recommend
--disaggregation only`` (the roles, the link, stored), its finance report naming the roles,
and mistakes answered with the option to fix."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl  # type: ignore[import-untyped]
import pytest

from tests.conftest import DEMO_SAMPLE
from tests.e2e.test_cli import run

SIMULATE = [
    "simulate",
    "--dataset",
    "demo",
    "--model",
    "llama-3.1-70b",
    "--gpu",
    "H100",
    "--tp",
    "4",
    "--engine",
    "vllm",
    "--requests",
    "400",
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("disagg") / "home"
    assert run(home, "ingest", str(DEMO_SAMPLE), "--name", "demo").returncode == 0
    return home


def test_simulate_prints_each_role_and_the_transfer(home: Path) -> None:
    result = run(home, *SIMULATE, "--prefill-replicas", "1", "--decode-replicas", "1", "-q")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "prefill: 1 x 4 x H100-SXM" in out and "decode: 1 x 4 x H100-SXM" in out
    # both roles fit one 8-GPU node: the KV cache moves over NVLink by default
    assert "KV transfer over nvlink-h100" in out
    assert "decode: from the KV cache's arrival" in out
    data = json.loads(
        run(
            home,
            *SIMULATE,
            "--prefill-replicas",
            "2",
            "--decode-replicas",
            "1",
            "--prefill-tp",
            "2",
            "--kv-link",
            "p5.48xlarge",
            "--price-per-hour",
            "40",
            "--json",
        ).stdout
    )
    d = data["disaggregation"]
    assert d["link"] == "aws-p5-efa" and d["first_token"] == "decode"
    assert [p["role"] for p in d["pools"]] == ["prefill", "decode"]
    assert data["serving"]["prefill"]["tp"] == 2 and data["serving"]["decode"]["tp"] == 4
    assert 0 < d["transfer_s"]["p50"] <= d["transfer_s"]["p99"]
    assert data["summary"]["all"]["finished"] == 400
    # $40 a replica-hour of --tp 4 GPUs: $10 a GPU-hour in either role, the pools adding up
    pools = [p["cost"]["total"] for p in d["pools"]]
    assert data["cost"]["total"] == pytest.approx(sum(pools))
    gpu_hours = data["cost"]["by_purchase"]["on-demand"]["gpu_hours"]
    assert data["cost"]["total"] == pytest.approx(10.0 * gpu_hours)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--kv-link", "aws-p5-efa"], "--kv-link describes a disaggregated run"),
        (["--prefill-replicas", "1"], "both --prefill-replicas and --decode-replicas"),
        (
            ["--prefill-replicas", "2", "--decode-replicas", "1"],
            "do not share one node's NVLink: give --kv-link",
        ),
        (
            ["--prefill-replicas", "1", "--decode-replicas", "1", "--kv-link", "pigeon"],
            "unknown link",
        ),
        (
            ["--prefill-replicas", "1", "--decode-replicas", "1", "--first-token", "both"],
            "first token",
        ),
    ],
)
def test_simulate_mistakes_name_the_option(home: Path, extra: list[str], message: str) -> None:
    result = run(home, *SIMULATE, *extra)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_recommend_disaggregated_and_its_report(home: Path, tmp_path: Path) -> None:
    args = [
        "recommend",
        "--dataset",
        "demo",
        "--load-scale",
        "0.2",
        "--model",
        "llama-3.1-70b",
        "--slo-ttft-p99",
        "3s",
        "--slo-tpot-p99",
        "40ms",
        "--gpu",
        "H100",
        "--verify-top",
        "3",
        "--workers",
        "1",
        "--no-growth-check",
        "--api",
        "never",  # the disaggregated fleet is the subject, not the API (cheaper at this load)
        "--disaggregation",
        "only",
    ]
    out = tmp_path / "rec.json"
    result = run(home, *args, "-q", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "disaggregated: prefill TP" in result.stdout
    assert "KV cache over" in result.stdout
    data = json.loads(out.read_text())
    winner = data["winner"]
    assert winner["architecture"] == "disaggregated"
    assert [p["role"] for p in winner["pools"]] == ["prefill", "decode"]
    assert data["request"]["options"]["disaggregation"] == "only"
    listed = json.loads(run(home, "recommendations", "list", "--json").stdout)
    rec_id = listed[-1]["id"]
    # the stored headline (recommendations list, the Overview) names the roles
    assert (
        f"prefill TP{winner['prefill_tp']} + decode TP{winner['decode_tp']}"
        in (listed[-1]["winner"])
    )
    book = tmp_path / "report.xlsx"
    report = run(home, "report", "--recommendation", str(rec_id), "--out", str(book))
    assert report.returncode == 0, report.stderr
    cells = [
        str(c)
        for row in openpyxl.load_workbook(book)["Summary"].iter_rows(values_only=True)
        for c in row
        if c is not None
    ]
    summary = " ".join(cells)
    assert (
        "disaggregated" in summary and f"decode replica(s) of TP {winner['decode_tp']}" in summary
    )
    bad = run(home, *args[:-1], "sometimes")
    assert bad.returncode != 0 and "--disaggregation 'sometimes'" in bad.stderr


def test_latency_shows_the_request_disaggregated(home: Path) -> None:
    base = ["latency", "--gpu", "H100", "--model", "llama-3.1-70b", "--input", "4000"]
    data = json.loads(
        run(
            home, *base, "--tp", "8", "--decode-tp", "4", "--kv-link", "ethernet-100g", "--json"
        ).stdout
    )
    d = data["disaggregated"]
    assert (d["prefill_tp"], d["decode_tp"], d["link"]) == (8, 4, "ethernet-100g")
    # TTFT is its stages; 1.31 GB over a shared 100 GbE NIC at 80%: 131 ms
    assert d["ttft_ms"] == pytest.approx(d["prefill_ms"] + d["transfer_ms"] + d["first_step_ms"])
    assert d["transfer_ms"] == pytest.approx(131.1, abs=0.5)
    assert d["transfer_ms"] / d["ttft_ms"] == pytest.approx(d["transfer_share_of_ttft"])
    text = run(home, *base, "--tp", "4", "--prefill-tp", "4", "--engine", "vllm").stdout
    assert "disaggregated: prefill on TP 4" in text and "nvlink-h100" in text
    for extra, message in (
        (["--tp", "4", "--decode-tp", "4", "--qps", "1"], "planner simulate --prefill-replicas"),
        (["--tp", "8", "--decode-tp", "4"], "give --kv-link"),
        (["--tp", "4", "--ep", "4"], "expert"),
    ):
        bad = run(home, *base, *extra)
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr
