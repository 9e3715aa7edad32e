"""``planner bench import`` as a user runs it, through a small Typer app that registers
:func:`import_command` as the real ``planner bench`` group does; and the command function
called directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from planner.cli.bench_import import import_command
from planner.latency.calibration import read_measurements
from planner.latency.catalog import load_catalog
from tests.conftest import ROOT

RESULTS = ROOT / "tests" / "fixtures" / "bench-results"
GUIDELLM = RESULTS / "guidellm-0.8.1_concurrent4_benchmarks.json"
VLLM = RESULTS / "vllm-bench-serve-0.32.0_c4.json"
LEGACY = RESULTS / "guidellm_benchmarks-only.json"
VLLM_CATALOG = RESULTS / "vllm-bench-serve_catalog-metadata.json"


def _app() -> typer.Typer:
    bench = typer.Typer(pretty_exceptions_enable=False)
    bench.command("import")(import_command)

    @bench.callback()
    def group() -> None:
        """Benchmark results."""

    app = typer.Typer(pretty_exceptions_enable=False)
    app.add_typer(bench, name="bench")
    return app


def _run(*args: str | Path, columns: int = 200) -> Result:
    runner = CliRunner()
    arguments = ["bench", "import", *map(str, args)]
    return runner.invoke(_app(), arguments, env={"COLUMNS": str(columns)})


def _no_traceback(result: Result) -> None:
    # a user error ends the command with a message and an exit code, never an exception
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_table_of_the_real_guidellm_file() -> None:
    result = _run(GUIDELLM, "--gpu", "CPU-2core", "--engine", "vllm", "--precision", "fp32")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "load" in line)
    for column in ("tool", "completed", "TTFT ms", "p99 TTFT", "TPOT ms", "tok/s", "req/s"):
        assert column in header
    row = next(line for line in lines if "concurrency=4" in line)
    # mean and p99 TTFT, TPOT from inter_token_latency_ms (21.34, not the TTFT-inclusive 25.31)
    assert "guidellm 0.8.1" in row and " 16 " in row
    assert "148.4" in row and "239.5" in row and "21.34" in row and "25.31" not in row
    assert "bench-llama-tiny on CPU-2core x1, fp32" in row


def test_table_fits_80_columns() -> None:
    options = ("--engine", "vllm", "--gpu", "L4", "--precision", "bf16")
    result = _run(GUIDELLM, LEGACY, VLLM, *options, columns=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), result.stdout
    # key columns stay; runs of a file with several are numbered
    assert any("#3" in line and "QPS=3.5" in line for line in lines)
    assert any("max" in line for line in lines)
    assert "left out" in result.stdout


def test_json_of_several_files() -> None:
    result = _run(VLLM, LEGACY, "--engine", "vllm", "--gpu", "L4", "--precision", "bf16", "--json")
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [r["planner"]["load"]["kind"] for r in runs] == [
        "concurrency",
        "concurrency",
        "max",
        "qps",
    ]
    first = runs[0]
    assert first["mean_ttft_ms"] == pytest.approx(135.39812750041165)
    assert first["p99_e2el_ms"] == pytest.approx(868.7787232704795)
    assert first["planner"]["hardware"] == {"gpu": "L4", "count": 1}  # --gpu over the file's
    assert first["planner"]["tool"] == {"name": "vllm bench serve", "version": None}
    assert first["planner"]["source"]["file"] == str(VLLM)
    assert {r["planner"]["engine"] for r in runs} == {"vllm"}


def test_out_csv_feeds_calibration(tmp_path: Path) -> None:
    out = tmp_path / "measured.csv"
    result = _run(VLLM_CATALOG, "--out-csv", out)
    assert result.exit_code == 0, result.output
    assert f"wrote 5 measurement rows to {out}" in result.stderr
    assert "planner calibrate" in result.stderr and "--engine vllm" in result.stderr
    points, excluded = read_measurements(out, load_catalog())
    assert excluded == []
    assert sorted(p.metric for p in points) == [
        "e2e",
        "output_throughput",
        "request_throughput",
        "tpot",
        "ttft",
    ]
    assert {(p.gpu, p.model, p.precision, p.tp, p.load_kind, p.load) for p in points} == {
        ("H100-SXM", "llama-3.1-8b", "fp8", 2, "qps", 2.5)
    }


def test_missing_options_are_named() -> None:
    result = _run(GUIDELLM)
    _no_traceback(result)
    assert result.exit_code == 2
    assert "pass --gpu, --engine and --precision" in result.stderr
    assert result.stdout == ""


def test_cpu_run_needs_catalog_names_only_for_rows(tmp_path: Path) -> None:
    out = tmp_path / "measured.csv"
    imported = _run(VLLM, "--engine", "vllm", "--json")
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)[0]["planner"]["hardware"]["gpu"] == "CPU-2core"
    refused = _run(VLLM, "--engine", "vllm", "--out-csv", out)
    _no_traceback(refused)
    assert refused.exit_code == 2
    assert "calibration needs catalog names" in refused.stderr
    assert "'CPU-2core'" in refused.stderr and "pass --gpu" in refused.stderr
    assert not out.exists()
    named = _run(VLLM, "--engine", "vllm", "--gpu", "L4", "--precision", "bf16", "--out-csv", out)
    assert named.exit_code == 0, named.output
    assert len(read_measurements(out, load_catalog())[0]) == 5


def test_bad_file_is_located(tmp_path: Path) -> None:
    broken = json.loads(GUIDELLM.read_text(encoding="utf-8"))
    del broken["benchmarks"][0]["metrics"]["inter_token_latency_ms"]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    result = _run(path, "--gpu", "L4", "--engine", "vllm", "--precision", "bf16")
    _no_traceback(result)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {path}: benchmarks[0].metrics.inter_token_latency_ms")
    assert "missing" in result.stderr


def test_output_folder_checked_before_any_work(tmp_path: Path) -> None:
    result = _run(tmp_path / "nope.json", "--out-csv", tmp_path / "missing" / "m.csv")
    _no_traceback(result)
    assert result.exit_code == 2
    assert "--out-csv" in result.stderr and "does not exist" in result.stderr


def test_command_function_called_directly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "m.csv"
    import_command(
        typer.Context(typer.main.get_command(_app())),
        [VLLM_CATALOG],
        gpu=None,
        engine=None,
        model=None,
        precision=None,
        tp=None,
        out_csv=out,
        store=False,
        run_name=None,
        as_json=True,
    )
    captured = capsys.readouterr()
    (run,) = json.loads(captured.out)
    assert run["planner"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert run["planner"]["tp"] == 2
    assert "wrote 5 measurement rows" in captured.err
    assert out.read_text(encoding="utf-8").startswith("source,url_or_path,model,gpu,num_gpus")
    with pytest.raises(typer.Exit) as exited:
        import_command(
            typer.Context(typer.main.get_command(_app())),
            [VLLM],
            gpu=None,
            engine=None,
            model=None,
            precision=None,
            tp=0,
            out_csv=None,
            store=False,
            run_name=None,
            as_json=False,
        )
    assert exited.value.exit_code == 2
    assert "--tp 0" in capsys.readouterr().err


# --- limits and friction (issue 30) -----------------------------------------------------------

VLLM_BARE = RESULTS / "vllm-bench-serve_no-metadata.json"


def test_no_store_shows_a_run_that_records_no_deployment() -> None:
    viewed = _run(VLLM_BARE, "--no-store", "--json")
    assert viewed.exit_code == 0, viewed.output
    (run,) = json.loads(viewed.stdout)
    assert run["planner"]["hardware"]["gpu"] is None and run["planner"]["engine"] is None
    stored = _run(VLLM_BARE)
    _no_traceback(stored)
    assert stored.exit_code == 2
    assert "the store needs them; pass --gpu, --engine and --precision" in stored.stderr
    assert "or --no-store to only view them" in stored.stderr


def test_out_csv_without_the_deployment_says_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "m.csv"
    result = _run(VLLM_BARE, "--no-store", "--out-csv", out)
    _no_traceback(result)
    assert result.exit_code == 2
    assert "--out-csv needs them; pass --gpu, --engine and --precision" in result.stderr
    assert "--no-store to only view" not in result.stderr
    assert not out.exists()


def test_size_is_checked_before_the_deployment(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as sparse:
        sparse.truncate(201 * 1024**2)
    # the size is refused before the missing --gpu/--engine, and before reading
    result = _run(VLLM_BARE, big)
    _no_traceback(result)
    assert result.exit_code == 1
    assert f"{big}: is 210,763,776 bytes, larger than 200 MiB" in result.stderr
    assert "--max-bytes 201M" in result.stderr
    small = _run(VLLM_BARE, "--no-store", "--max-bytes", "1K")
    assert small.exit_code == 1 and "larger than 1,024 bytes" in small.stderr
    assert _run(VLLM_BARE, "--no-store", "--max-bytes", "4K").exit_code == 0
    bad = _run(VLLM_BARE, "--no-store", "--max-bytes", "lots")
    assert bad.exit_code == 2 and "--max-bytes lots: expected a size" in bad.stderr


def test_absurd_latency_refused_unless_allowed(tmp_path: Path) -> None:
    data = json.loads(VLLM.read_text(encoding="utf-8"))
    data["mean_ttft_ms"] = 1e308
    path = tmp_path / "absurd.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    refused = _run(path, "--engine", "vllm")
    _no_traceback(refused)
    assert refused.exit_code == 1
    assert f"{path}: mean_ttft_ms: expected a latency in ms" in refused.stderr
    assert "got 1e+308; if the value is real, pass --allow-extreme" in refused.stderr
    assert "stored as" not in refused.stderr
    allowed = _run(path, "--engine", "vllm", "--no-store", "--allow-extreme", "--json")
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(allowed.stdout)[0]["mean_ttft_ms"] == 1e308
