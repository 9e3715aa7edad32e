"""A gateway log of two models from end to end, as a user runs it: ingest ten days, forecast
each model, plan the two forecasts as one fleet (``recommend --demand ID,ID``), and report it:
the workbook's showback has a row per model and pool, the FOCUS file names each line's model
and pool."""

from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import pytest
from openpyxl import load_workbook  # type: ignore[import-untyped]

from tests.e2e.test_cli import run

B8 = "meta-llama/Llama-3.1-8B-Instruct"
B70 = "meta-llama/Llama-3.1-70B-Instruct"
DAYS = 10


def write_log(path: Path) -> dict[str, int]:
    """Ten days of a daily pattern (0.01 to 0.09 requests/s), a quarter of them the 70B's."""
    rng = random.Random(11)
    t, counts = 0.0, {B8: 0, B70: 0}
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["ts", "model", "prompt", "completion"])
        while t < DAYS * 86400:
            hour = t / 3600 % 24
            t += rng.expovariate(0.05 + 0.04 * math.sin(2 * math.pi * (hour - 6) / 24))
            model = B70 if rng.random() < 0.25 else B8
            counts[model] += 1
            out.writerow(
                [f"{1717200000 + t:.3f}", model, rng.randint(100, 2000), rng.randint(20, 300)]
            )
    return counts


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("journey")
    home = folder / "home"
    log = folder / "gateway.csv"
    write_log(log)
    maps = ["arrival=ts", "model=model", "input_tokens=prompt", "output_tokens=completion"]
    args = [a for m in maps for a in ("--map", m)]
    done = run(home, "ingest", str(log), "--name", "gateway", "--time-kind", "epoch", *args)
    assert done.returncode == 0, done.stderr
    return home


def test_ingest_forecast_recommend_report(home: Path, tmp_path: Path) -> None:
    ids = []
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        done = run(
            home, "forecast", "--dataset", "gateway", "--model", model, "--horizon", "3d", "--json"
        )
        assert done.returncode == 0, done.stderr
        ids.append(str(json.loads(done.stdout)["id"]))
    done = run(
        home,
        "recommend",
        "--demand",
        ",".join(ids),
        "--slo-ttft-p99",
        "2s",
        "--slo-tpot-p99",
        "100ms",
        "--gpu",
        "L4,H100-SXM",
        "--provider",
        "aws",
        "--confidence",
        "0",
        "--verify-top",
        "2",
        "--api",
        "never",  # at 0.01-0.09 requests/s an API is cheaper; the GPU pools are the subject
        "--json",
        "-q",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["kind"] == "fleet" and data["winner"] is not None
    models = {m for p in data["winner"]["pools"] for m in p["models"]}
    assert models == {"llama-3.1-8b", "llama-3.1-70b"}
    # each model's demand is its own forecast's, over the hours the two share
    assert data["demand"]["source"] == f"forecasts #{ids[0]}, #{ids[1]}"
    share = {m["model"]: m["share_of_requests"] for m in data["models"]}
    assert 0.6 < share["llama-3.1-8b"] < 0.9
    stored = data["id"]

    book = tmp_path / "fleet.xlsx"
    done = run(home, "report", "--recommendation", str(stored), "--out", str(book))
    assert done.returncode == 0, done.stderr
    sheet = load_workbook(book)["Showback"]
    text = " ".join(str(c.value) for row in sheet.iter_rows() for c in row if c.value is not None)
    assert "llama-3.1-8b" in text and "llama-3.1-70b" in text

    focus = tmp_path / "fleet.csv"
    done = run(home, "report", "--recommendation", str(stored), "--out", str(focus))
    assert done.returncode == 0, done.stderr
    with focus.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["x_Model"] for r in rows} == models
    pools = {p["pool"] for p in data["winner"]["pools"]}
    assert {r["x_Pool"] for r in rows} == pools
    for r in rows:
        tags = json.loads(r["Tags"])
        assert tags["planner:model"] == r["x_Model"] and tags["planner:pool"] == r["x_Pool"]
