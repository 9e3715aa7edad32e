"""A gateway log of two models, as a user runs the commands on it: ``planner simulate --model``
replays (or draws lengths from) only that model's requests, ``planner datasets show`` keeps the
two names apart at 80 columns, and names the catalog does not know are an error that says how
to map or skip them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e.test_cli import run
from tests.e2e.test_narrow_tables_cli import run80

B8 = "meta-llama/Llama-3.1-8B-Instruct"
B70 = "meta-llama/Llama-3.1-70B-Instruct"
SIM = ["--gpu", "H100-SXM", "--precision", "fp8", "--tp", "2", "--confidence", "0", "-q"]
LONG = "our-gateway/deployments/production/" + "x" * 60  # two names alike for 95 characters


def rows() -> list[tuple[float, str, int, int]]:
    """Three 8B requests to each 70B one, over ~3 minutes; the 70B prompts are longer (2,000
    tokens and up) than any 8B one, so where lengths came from shows."""
    rng = random.Random(7)
    t, out = 0.0, []
    for i in range(400):
        t += rng.expovariate(2.0)
        big = i % 4 == 0
        prompt = rng.randint(2000, 2999) if big else rng.randint(100, 999)
        out.append((round(t, 3), B70 if big else B8, prompt, rng.randint(10, 200)))
    return out


def ingest(home: Path, folder: Path, name: str, lines: list[tuple[float, str, int, int]]) -> None:
    path = folder / f"{name}.csv"
    body = "\n".join(f"{1717200000 + t},{m},{i},{o}" for t, m, i, o in lines)
    path.write_text("ts,model,prompt,completion\n" + body + "\n", encoding="utf-8")
    maps = ["arrival=ts", "model=model", "input_tokens=prompt", "output_tokens=completion"]
    args = [a for m in maps for a in ("--map", m)]
    done = run(home, "ingest", str(path), "--name", name, "--time-kind", "epoch", *args)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("multi")
    home = folder / "home"
    log = rows()
    ingest(home, folder, "multi", log)
    # the same log with a tenth of the 8B requests logged under names the catalog lacks
    odd = [
        (
            t,
            (f"{LONG}-east" if i // 10 % 2 else f"{LONG}-west") if m == B8 and i % 10 == 1 else m,
            p,
            o,
        )
        for i, (t, m, p, o) in enumerate(log)
    ]
    ingest(home, folder, "odd", odd)
    return home


def test_simulate_replays_only_the_requests_of_the_model_asked_for(
    home: Path, tmp_path: Path
) -> None:
    log = rows()
    for model, logged in (("llama-3.1-70b", B70), ("Llama-3.1-8B", B8)):
        out = tmp_path / f"{model}.parquet"
        done = run(
            home,
            "simulate",
            "--dataset",
            "multi",
            "--model",
            model,
            *SIM,
            "--out-requests",
            str(out),
            "--json",
        )
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        mine = [p for _, m, p, _ in log if m == logged]
        assert data["requests"] == len(mine) == (100 if logged == B70 else 300)
        picked = data["summary"]["log_models"]
        assert picked["log_names"] == [logged] and picked["requests"] == len(mine)
        assert picked["log_requests"] == 400 and picked["skipped_requests"] == 0
        assert any(f"only the {len(mine)} of 400 requests" in n for n in data["notes"])
        assert sorted(pd.read_parquet(out)["input_tokens"]) == sorted(mine)


def test_lengths_come_from_the_models_requests_when_the_log_has_several(
    home: Path, tmp_path: Path
) -> None:
    rates = tmp_path / "rates.csv"
    rates.write_text("ds,y\n2024-06-01 00:00:00,600\n", encoding="utf-8")
    out = tmp_path / "requests.parquet"
    done = run(
        home,
        "simulate",
        "--rates",
        str(rates),
        "--tokens-from",
        "multi",
        "--model",
        "llama-3.1-70b",
        *SIM,
        "--out-requests",
        str(out),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    prompts = pd.read_parquet(out)["input_tokens"]
    assert len(prompts) > 100 and prompts.min() >= 2000  # 70B lengths only
    assert json.loads(done.stdout)["summary"]["log_models"]["use"] == "token lengths"


def test_a_model_the_log_lacks_and_unmapped_names_say_what_to_do(home: Path) -> None:
    absent = run(home, "simulate", "--dataset", "multi", "--model", "qwen2.5-7b", *SIM)
    assert absent.returncode == 2
    assert "has no requests of model 'qwen2.5-7b'" in absent.stderr
    assert "llama-3.1-8b 75.0%" in absent.stderr and "llama-3.1-70b 25.0%" in absent.stderr

    odd = run(home, "simulate", "--dataset", "odd", "--model", "llama-3.1-8b", *SIM)
    assert odd.returncode == 2
    message = " ".join(odd.stderr.split())
    assert "2 model names are not in the catalog" in message
    assert "--model-map LOGNAME=CATALOG" in message and "--unmapped skip" in message
    assert "their 40 requests (10.0% of 400) out" in message
    for side in ("east", "west"):  # each name whole, with its count and share
        assert f"{LONG}-{side}' (20 requests, 5.0%)" in message

    skipped = run(
        home, "simulate", "--dataset", "odd", "--model", "llama-3.1-8b", *SIM, "--unmapped", "skip"
    )
    assert skipped.returncode == 0, skipped.stderr
    data = json.loads(
        run(
            home,
            "simulate",
            "--dataset",
            "odd",
            "--model",
            "llama-3.1-8b",
            *SIM,
            "--unmapped",
            "skip",
            "--json",
        ).stdout
    )
    assert data["requests"] == 260 and data["summary"]["log_models"]["skipped_share"] == 0.1
    assert any("left out 40 requests (10.0%)" in n for n in data["notes"])

    # mapped instead: the two gateway names are 8B too
    mapped = run(
        home,
        "simulate",
        "--dataset",
        "odd",
        "--model",
        "llama-3.1-8b",
        *SIM,
        "--model-map",
        f"{LONG}-east=llama-3.1-8b,{LONG}-west=Llama-3.1-8B",
        "--json",
    )
    assert mapped.returncode == 0, mapped.stderr
    assert json.loads(mapped.stdout)["requests"] == 300

    bad = run(
        home, "simulate", "--dataset", "odd", "--model", "llama-3.1-8b", *SIM, "--unmapped", "x"
    )
    assert bad.returncode == 2 and "--unmapped 'x': expected error or skip" in bad.stderr


def test_datasets_show_keeps_the_names_apart_at_80_columns(home: Path) -> None:
    shown = run80(home, "datasets", "show", "multi")
    assert shown.returncode == 0, shown.stderr
    assert "…" not in shown.stdout
    assert all(len(line) <= 80 for line in shown.stdout.splitlines())
    for name, catalog in ((B8, "llama-3.1-8b"), (B70, "llama-3.1-70b")):
        line = next(line for line in shown.stdout.splitlines() if name in line)
        assert catalog in line  # the name whole, with the catalog model it maps to
    data = json.loads(run80(home, "datasets", "show", "multi", "--json").stdout)
    assert {(m["log_name"], m["catalog_model"]) for m in data["models"]} == {
        (B8, "llama-3.1-8b"),
        (B70, "llama-3.1-70b"),
    }
    assert {g["model"]: g["catalog_model"] for g in data["by_model"]} == {
        B8: "llama-3.1-8b",
        B70: "llama-3.1-70b",
    }

    # names alike for 95 characters: folded, never cut, and their columns told apart
    odd = run80(home, "datasets", "show", "odd")
    assert odd.returncode == 0, odd.stderr
    text = odd.stdout
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert "-east" in text and "-west" in text and text.count("unmapped") == 2
    headers = next(line for line in text.splitlines() if "#3" in line and "#4" in line)
    assert "llama-3.1-8b" in headers and "llama-3.1-70b" in headers and "#4" in headers
    models = text[: text.index(headers)]  # the models table: which column is which name
    assert models.count("#3") == models.count("#4") == 1
