"""``planner prices`` as a user runs it: the installed command, a real store, real files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_cli import PLANNER, run


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.mark.parametrize(
    "command",
    [
        ["prices"],
        ["prices", "list"],
        ["prices", "compare"],
        ["prices", "import"],
        ["prices", "diff"],
        ["prices", "versions"],
        ["prices", "load-snapshot"],
        ["prices", "refresh"],
    ],
)
def test_help(home: Path, command: list[str]) -> None:
    result = run(home, *command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: planner" in result.stdout


def test_list_loads_the_snapshot_on_first_use(home: Path) -> None:
    result = run(home, "prices", "list", "--provider", "aws", "--gpu", "A10G", "--json")
    assert result.returncode == 0, result.stderr
    assert "loaded the bundled snapshot as version 1 (179 prices)" in result.stderr
    rows = json.loads(result.stdout)
    assert {r["instance_type"] for r in rows} >= {"g5.xlarge", "g5.2xlarge", "g5.48xlarge"}
    g5 = next(r for r in rows if r["instance_type"] == "g5.2xlarge")
    assert (g5["usd_per_hour"], g5["version_id"], g5["source_kind"]) == (1.212, 1, "snapshot")
    assert g5["source"].startswith("aws/karpenter-provider-aws")
    again = run(home, "prices", "list", "--region", "us-east4", "--option", "committed")
    assert again.returncode == 0 and "loaded the bundled snapshot" not in again.stderr
    assert "a3-megagpu-8g" in again.stdout and "committed-3y" in again.stdout
    loaded = json.loads(run(home, "prices", "load-snapshot", "--json").stdout)
    assert (loaded["id"], loaded["loaded"]) == (1, False)


def test_compare_h100_across_clouds_cheapest_gpu_hour_first(home: Path) -> None:
    result = run(home, "prices", "compare", "--gpu", "H100", "--option", "all", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    per_gpu = [r["usd_per_gpu_hour"] for r in rows]
    assert per_gpu == sorted(per_gpu)
    assert {r["provider"] for r in rows} == {"aws", "gcp", "azure"}
    on_demand = [r for r in rows if r["purchase_option"] == "on-demand"]
    assert min(r["usd_per_gpu_hour"] for r in on_demand) == pytest.approx(6.88)  # p5 / 8
    assert all(r["vs_cheapest_on_demand"] is not None for r in rows)
    committed = next(
        r
        for r in rows
        if r["instance_type"] == "a3-highgpu-8g"
        and r["region"] == "us-central1"
        and r["purchase_option"] == "committed-1y"
    )
    assert committed["break_even_utilization"] == pytest.approx(61.383672 / 88.49, abs=1e-6)
    only_commitments = run(home, "prices", "compare", "--gpu", "H100", "--option", "committed")
    assert only_commitments.returncode == 0 and "69%" in only_commitments.stdout
    table = run(home, "prices", "compare", "--gpu", "H100", "--option", "on-demand")
    assert table.returncode == 0
    assert "p5.48xlarge" in table.stdout and "Standard_ND96isr_H100_v5" in table.stdout
    # a catalog GPU without prices: an empty result with a note, as `prices list` gives
    missing = run(home, "prices", "compare", "--gpu", "MI300X")
    assert missing.returncode == 0, missing.stderr
    assert "no prices match these filters" in missing.stdout
    bad = run(home, "prices", "compare", "--gpu", "H100", "--option", "monthly")
    assert bad.returncode == 2 and "unknown purchase option 'monthly'" in bad.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--gpu", "nope"], "--gpu: unknown GPU 'nope'; known (closest first):"),
        (["--gpu", "H10"], "H100"),
        (["--provider", "gpc"], "--provider: unknown provider 'gpc'; known: gcp"),
        (["--region", "us-east-2"], "--region: no price has region 'us-east-2'"),
        (["--option", "spto"], "--option: unknown purchase option 'spto'"),
    ],
)
def test_unknown_filter_values_exit_2_alike_in_list_and_compare(
    home: Path, options: list[str], message: str
) -> None:
    for command in (["list"], ["compare"]):
        extra = [] if "--gpu" in options or command == ["list"] else ["--gpu", "H100"]
        result = run(home, "prices", *command, *extra, *options)
        assert result.returncode == 2, (command, result.stderr)
        assert message in result.stderr and "internal error" not in result.stderr


def test_known_filter_values_matching_nothing_list_nothing(home: Path) -> None:
    for command in (["list", "--gpu", "MI300X"], ["compare", "--gpu", "MI300X"]):
        result = run(home, "prices", *command, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == [] and "no prices match" in result.stderr


def _run_at(home: Path, columns: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PLANNER_DATABASE_URL", "PLANNER_DEBUG")
    }
    env.update(PLANNER_HOME=str(home), COLUMNS=str(columns))
    return subprocess.run(
        [PLANNER, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_tables_keep_key_columns_whole_at_80_columns(home: Path) -> None:
    listed = _run_at(home, 80, "prices", "list", "--gpu", "H100")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for name in ("p5.48xlarge", "Standard_ND96isr_H100_v5", "a3-megagpu-8g", "us-central1"):
        assert name in listed.stdout
    row = next(line for line in lines if "Standard_ND96isr_H100_v5" in line)
    assert "azure" in row and "eastus" in row and "8 x H100-SXM" in row and "98.3200" in row
    assert "narrow terminal: left out" in listed.stdout
    compared = _run_at(home, 80, "prices", "compare", "--gpu", "H100", "--option", "on-demand")
    assert compared.returncode == 0, compared.stderr
    assert max(len(line) for line in compared.stdout.splitlines()) <= 80
    row = next(line for line in compared.stdout.splitlines() if "p5.48xlarge" in line)
    assert "aws" in row and "us-east-1" in row and "on-demand" in row and "55.0400" in row
    assert "Standard_ND96isr_H100_v5" in compared.stdout
    wide = _run_at(home, 200, "prices", "list", "--gpu", "H100")
    assert "$/GPU-hour" in wide.stdout and "narrow terminal" not in wide.stdout


def test_import_overrides_and_diff(home: Path, tmp_path: Path) -> None:
    sheet = tmp_path / "negotiated.csv"
    sheet.write_text(
        "provider,region,instance_type,purchase_option,usd_per_hour\n"
        "aws,us-east-1,p5.48xlarge,on-demand,44.032\n"
        "gcp,us-central1,a3-highgpu-8g,committed-1y,55.0\n"
    )
    result = run(home, "prices", "import", str(sheet), "--label", "EDP 2027", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["id"], data["row_count"], data["label"]) == (2, 2, "EDP 2027")
    listed_prices = sorted(o["list_usd_per_hour"] for o in data["overrides"])
    assert listed_prices == pytest.approx([55.04, 61.383672])

    listed = json.loads(run(home, "prices", "list", "--gpu", "H100-SXM", "--json").stdout)
    p5 = next(r for r in listed if r["instance_type"] == "p5.48xlarge")
    assert (p5["usd_per_hour"], p5["source_kind"], p5["list_usd_per_hour"]) == (
        44.032,
        "user",
        55.04,
    )

    diffed = run(home, "prices", "diff", "--json")
    assert diffed.returncode == 0, diffed.stderr
    changes = json.loads(diffed.stdout)
    assert (changes["old"]["id"], changes["new"]["id"], changes["scope"]) == (1, 2, "keys")
    assert changes["removed"] == [] and changes["added"] == []
    pct = {tuple(c["key"][:3]): c["pct_change"] for c in changes["changed"]}
    assert pct[("aws", "us-east-1", "p5.48xlarge")] == pytest.approx(-20.0)
    text = run(home, "prices", "diff", "1", "2")
    assert text.returncode == 0 and "-20.0%" in text.stdout and "removed" in text.stdout
    one = run(home, "prices", "diff", "1")
    assert one.returncode == 2 and "give two versions" in one.stderr


def test_a_bad_sheet_is_refused_with_its_row_and_column(home: Path, tmp_path: Path) -> None:
    sheet = tmp_path / "bad.csv"
    sheet.write_text(
        "provider,region,instance_type,purchase_option,usd_per_hour\n"
        "aws,us-east-1,g5.xlarge,on-demand,0.9\n"
        "aws,us-east-1,g6.xlarge,on-demand,0\n"
    )
    result = run(home, "prices", "import", str(sheet))
    assert result.returncode == 1
    assert (
        f"error: {sheet}: row 2, line 3, column 'usd_per_hour': expected a positive price, got 0"
        in result.stderr
    )
    versions = json.loads(run(home, "prices", "versions", "--json").stdout)
    assert [v["source_kind"] for v in versions] == ["snapshot"]  # nothing of the bad sheet


def test_hostile_sheets_are_refused_cleanly(home: Path, tmp_path: Path) -> None:
    header = "provider,region,instance_type,purchase_option,usd_per_hour\n"
    comma = tmp_path / "eu.csv"
    comma.write_text(header + 'aws,us-east-1,g5.2xlarge,on-demand,"1,09"\n')
    refused = run(home, "prices", "import", str(comma))
    assert refused.returncode == 1, refused.stderr
    assert f"error: {comma}: row 1, line 2, column 'usd_per_hour'" in refused.stderr
    assert "--decimal-comma" in refused.stderr
    imported = run(home, "prices", "import", str(comma), "--decimal-comma", "--json")
    assert imported.returncode == 0, imported.stderr
    data = json.loads(imported.stdout)
    assert data["imported"] and data["overrides"][0]["usd_per_hour"] == 1.09
    again = run(home, "prices", "import", str(comma), "--decimal-comma")
    assert again.returncode == 0, again.stderr
    assert "already imported as version 2" in again.stdout and "nothing to do" in again.stdout
    versions = json.loads(run(home, "prices", "versions", "--json").stdout)
    assert [v["source_kind"] for v in versions] == ["snapshot", "user"]

    typo = tmp_path / "typo.csv"
    typo.write_text(header + "aws,us-east-1,g5.2xlarge,on-demand,109\n")
    flagged = run(home, "prices", "import", str(typo))
    assert flagged.returncode == 1 and "implausible" in flagged.stderr
    assert "--force" in flagged.stderr
    assert run(home, "prices", "import", str(typo), "--force").returncode == 0

    overflow = tmp_path / "box.csv"
    overflow.write_text(
        "provider,region,instance_type,gpu_model,gpu_count,purchase_option,usd_per_hour\n"
        "other,dc1,box,H100,99999999999999999999,on-demand,10\n"
    )
    result = run(home, "prices", "import", str(overflow))  # was exit 70 (OverflowError)
    assert result.returncode == 1 and "column 'gpu_count'" in result.stderr
    junk = tmp_path / "quote.xlsx"
    junk.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600))
    result = run(home, "prices", "import", str(junk))
    assert result.returncode == 1 and "password-protected" in result.stderr


def test_a_failed_refresh_exits_non_zero_and_keeps_the_last_good_prices(home: Path) -> None:
    # No credentials anywhere: the AWS loader fails before any network call.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PLANNER_"))}
    env.update(
        PLANNER_HOME=str(home),
        COLUMNS="200",
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-credentials"),
        AWS_CONFIG_FILE=str(home / "no-config"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    result = subprocess.run(
        [PLANNER, "prices", "refresh", "--provider", "aws", "--region", "us-east-1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert (
        "error: aws price refresh failed: " in result.stderr
        or "error: the aws price loader is not available" in result.stderr
    )
    if "refresh failed" in result.stderr:
        assert "Kept the last good prices: version 1 (snapshot" in result.stderr
        versions = json.loads(run(home, "prices", "versions", "--json").stdout)
        assert [(v["source_kind"], v["status"]) for v in versions] == [
            ("snapshot", "ok"),
            ("aws", "failed"),
        ]
        assert versions[1]["error"]
    listed = json.loads(run(home, "prices", "list", "--provider", "aws", "--json").stdout)
    assert len(listed) == 38  # the snapshot's AWS prices, still in force
    wrong = run(home, "prices", "refresh", "--provider", "oracle")
    assert wrong.returncode == 2 and "expected one of aws, gcp, azure" in wrong.stderr
