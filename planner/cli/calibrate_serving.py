"""``planner calibrate --serving``: parse, call the use case, render (progress on stderr)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from planner.cli.context import print_json, stderr, stdout
from planner.cli.tables import Column, print_table
from planner.common.text import printable
from planner.errors import UsageError

if TYPE_CHECKING:
    from planner.usecases.calibrate import HeldOutError, ServingCalibration


DEFAULT_HOLDOUT = 0.3  # calibrate's --holdout default: given with --serving only when changed


def serving_only(*, serving: bool = False, **options: object) -> None:
    """Refuse the options that only ``--serving`` reads, given without it, or (``serving``)
    the options of a fit to measurement CSV files, given with it."""
    if serving:
        holdout = options.pop("holdout", DEFAULT_HOLDOUT)
        given = [name for name, value in options.items() if value is not None]
        given += ["holdout"] if holdout != DEFAULT_HOLDOUT else []
        if given:
            names = ", ".join(f"--{name}" for name in given)
            raise UsageError(
                f"{names}: not with --serving (a serving fit holds out whole runs, starts from "
                "the engine's bundled profile and writes with --out)"
            )
        return
    given = [name for name, value in options.items() if value is not None]
    if given:
        flags = {"evaluations": "--max-evaluations"}
        names = ", ".join(flags.get(name, f"--{name}") for name in given)
        raise UsageError(f"{names}: only with --serving (calibration from serving runs)")


def calibrate_serving_command(
    files: list[Path],
    name: str | None,
    deployment: dict[str, str | None],
    tp: int | None,
    out: Path | None,
    max_evaluations: int | None,
    *,
    as_json: bool,
) -> None:
    """Read the serving files, fit, and print the held-out error before and after."""
    from planner.usecases.calibrate import ServingCalibrateRequest, calibrate_serving

    request = ServingCalibrateRequest(
        files=tuple(files),
        name=name,
        out=out,
        tp=tp,
        max_evaluations=max_evaluations,
        engine=deployment["engine"],
        gpu=deployment["gpu"],
        model=deployment["model"],
        precision=deployment["precision"],
    )
    result, skipped = calibrate_serving(
        request, progress=lambda text: stderr.print(text, markup=False, soft_wrap=True)
    )
    for note in skipped:
        stderr.print(note, markup=False, soft_wrap=True)
    if as_json:
        print_json({**result.summary(), "left_out": skipped, "written_to": _shown(out)})
        return
    _print_result(result)
    if out is not None:
        stdout.print(f"wrote profile {result.profile.name} to {printable(str(out))}", markup=False)


def _shown(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _percent(value: float) -> str:
    if value != value or value == float("inf"):  # NaN, or a replay that never finished
        return "unserved" if value == float("inf") else "-"
    return f"{value * 100:.1f}%"


def _print_result(result: ServingCalibration) -> None:
    from planner.usecases.calibrate import SERVING_SPLITS

    rows: list[HeldOutError] = [*result.by_metric, result.overall]
    columns = [
        Column("metric", [r.metric for r in rows]),
        Column("runs", [str(r.points) for r in rows], justify="right"),
        Column("before median", [_percent(r.before_median) for r in rows], justify="right"),
        Column("before p90", [_percent(r.before_p90) for r in rows], drop=1, justify="right"),
        Column("held-out median", [_percent(r.after_median) for r in rows], justify="right"),
        Column("held-out p90", [_percent(r.after_p90) for r in rows], drop=1, justify="right"),
    ]
    print_table(
        columns,
        title=f"Absolute error, {result.start.name} (before) and held out ({result.split})",
    )
    configurations = sorted({run.configuration for run in result.runs})
    stdout.print(
        f"{len(result.runs)} runs, {len(configurations)} configuration"
        f"{'s' if len(configurations) > 1 else ''}; held out: {SERVING_SPLITS[result.split]} "
        f"({result.folds} fits)",
        markup=False,
        soft_wrap=True,
    )
    params = ", ".join(f"{k}={v:.4g}" for k, v in result.profile.params().items())
    stdout.print(
        f"fitted on every run: profile {result.profile.name}: {params}",
        markup=False,
        soft_wrap=True,
    )
