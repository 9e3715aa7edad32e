"""``planner prices bill``: a gateway log as per-token APIs would bill it, month by month and
model by model, checked against the snapshot's prices worked by hand; cached tokens billed at
the cached price; the batch API's discount; names no offer serves said, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pricing.api import load_api_snapshot
from tests.e2e.test_cli import run

MINI = "gpt-4o-mini-2024-07-18"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
ODD = "our-private-finetune"
NOV, DEC = 1700000000, 1701500000  # 2023-11-14 and 2023-12-02 (UTC)
# (arrival, model, input, output, cached)
ROWS = [
    (NOV + 0, MINI, 1_000, 200, 600),
    (NOV + 10, MINI, 3_000, 100, 0),
    (NOV + 20, LLAMA, 2_000, 500, 0),
    (NOV + 30, ODD, 500, 50, 0),
    (DEC + 0, MINI, 10_000, 1_000, 4_000),
    (DEC + 5, LLAMA, 4_000, 300, 0),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bill")
    path = folder / "gateway.csv"
    body = "\n".join(f"{t},{m},{i},{o},{c}" for t, m, i, o, c in ROWS)
    path.write_text("ts,model,prompt,completion,cached\n" + body + "\n", encoding="utf-8")
    maps = [
        "arrival=ts",
        "model=model",
        "input_tokens=prompt",
        "output_tokens=completion",
        "cached_tokens=cached",
    ]
    home = folder / "home"
    args = [a for m in maps for a in ("--map", m)]
    done = run(home, "ingest", str(path), "--name", "gw", "--time-kind", "epoch", *args)
    assert done.returncode == 0, done.stderr
    return home


def _openai_mini() -> tuple[float, float, float, float]:
    [price] = [
        p for p in load_api_snapshot() if p.provider == "openai" and p.offer == "gpt-4o-mini"
    ]
    assert price.cached_input_usd_per_mtok is not None and price.batch_discount is not None
    return (
        price.input_usd_per_mtok,
        price.cached_input_usd_per_mtok,
        price.output_usd_per_mtok,
        price.batch_discount,
    )


def _bill(home: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    done = run(home, "prices", "bill", "--dataset", "gw", "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_log_billed_by_month_and_model_at_the_snapshots_prices(home: Path) -> None:
    bill = _bill(home, "--provider", "openai")
    lines = {(line["period"], line["log_model"]): line for line in bill["lines"]}
    assert set(lines) == {
        ("2023-11", MINI),
        ("2023-11", LLAMA),
        ("2023-11", ODD),
        ("2023-12", MINI),
        ("2023-12", LLAMA),
    }
    nov = lines[("2023-11", MINI)]
    assert (nov["requests"], nov["input_tokens"], nov["cached_tokens"], nov["output_tokens"]) == (
        2,
        4_000,
        600,
        300,
    )
    assert nov["cached_known_share"] == 1.0
    # by hand: uncached input at the input price, cached at the cached price, output at its own
    p_in, p_cached, p_out, _ = _openai_mini()
    by_hand = (3_400 * p_in + 600 * p_cached + 300 * p_out) / 1e6
    assert nov["cheapest"]["provider"] == "openai"
    assert nov["cheapest"]["usd"] == pytest.approx(by_hand, rel=1e-12)
    dec = lines[("2023-12", MINI)]
    assert dec["cheapest"]["usd"] == pytest.approx(
        (6_000 * p_in + 4_000 * p_cached + 1_000 * p_out) / 1e6, rel=1e-12
    )
    # OpenAI serves no Llama and no private model: no offer, and the totals leave them out
    assert lines[("2023-11", LLAMA)]["offers"] == [] and lines[("2023-11", ODD)]["offers"] == []
    assert bill["totals_usd"]["2023-11"] == pytest.approx(by_hand)
    assert any(ODD in note for note in bill["notes"])


def test_every_offer_of_an_open_model_cheapest_first(home: Path) -> None:
    bill = _bill(home)
    [line] = [x for x in bill["lines"] if x["period"] == "2023-12" and x["log_model"] == LLAMA]
    assert line["catalog_model"] == "llama-3.1-8b"
    usd = [o["usd"] for o in line["offers"]]
    assert len(usd) >= 2 and usd == sorted(usd)
    assert len({o["provider"] for o in line["offers"]}) >= 2  # more than one host serves it
    assert all(o["source_url"].startswith("http") and o["source_date"] for o in line["offers"])


def test_the_batch_api_takes_its_discount_and_leaves_out_offers_without_one(home: Path) -> None:
    plain = _bill(home, "--provider", "openai")
    batch = _bill(home, "--provider", "openai", "--batch")
    discount = _openai_mini()[3]
    assert batch["totals_usd"]["2023-12"] == pytest.approx(
        plain["totals_usd"]["2023-12"] * (1 - discount)
    )
    together = _bill(home, "--provider", "together", "--batch")
    assert all(line["offers"] == [] for line in together["lines"])


def test_the_table_and_the_mistakes(home: Path) -> None:
    done = run(home, "prices", "bill", "--dataset", "gw")
    assert done.returncode == 0, done.stderr
    assert "2023-11" in done.stdout and "at the cheapest offers" in done.stdout
    assert ODD in done.stderr  # the note names the model nothing serves
    for args, message in (
        (["--dataset", "nope"], "no dataset named"),
        (["--dataset", "gw", "--provider", "acme"], "--provider"),
        (["--dataset", "gw", "--model", "no-such-model-xyz"], "--model"),
    ):
        bad = run(home, "prices", "bill", *args)
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
