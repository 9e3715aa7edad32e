"""NVIDIA AIConfigurator's predictions for the NIM (TensorRT-LLM) serving measurements of
data/reference/serving_under_load.csv (rows 1-795), side by side with the measurements
(issue 37 item 6: the peers' figures on the same data).

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0
    /tmp/aic/bin/python benchmarks/peers_aiconfigurator.py                 # predict + summary
    /tmp/aic/bin/python benchmarks/peers_aiconfigurator.py --write-readme  # also the README table
    python benchmarks/peers_aiconfigurator.py --summary-only [--json]      # from the CSV only

It does not import planner (it runs in AIConfigurator's own virtual environment); the
summary needs only the standard library. Every row is predicted once per mode, at the row's
concurrency as the batch size (about 10 s for all rows once the database is loaded):

- ``static``: AIConfigurator's static batch (``cli_estimate(mode="static")``): the whole batch
  is prefilled in one step, then decoded together. No queueing, no arrivals, no lock-step
  waves: its TTFT is one prefill of ``batch x ISL`` tokens, not GenAI-Perf's wave-averaged TTFT.
- ``agg``: its aggregated in-flight-batching steady state (``cli_estimate(mode="agg")``, the
  model behind ``aiconfigurator cli default``'s agg results): ``batch`` requests in flight, one
  request's prefill (``ctx_tokens`` = ISL) mixed into decode steps; TTFT is one request's
  prefill times a heuristic queueing factor of 2-4, not a simulation of arrivals.

Mapping of the rows (stated per row in ``notes``): Llama-3 8B/70B Instruct and Llama-3.3-70B
are predicted as AIConfigurator's ``meta-llama/Meta-Llama-3.1-8B`` / ``-70B`` (same layer
shapes); fp16 and bf16 as ``bfloat16`` GEMMs and KV cache (its databases hold no fp16 GEMMs;
both run at the same tensor-core rate); fp8 as ``fp8`` GEMMs with an ``fp8`` KV cache (the
rows do not state the KV dtype); FMHA as AIConfigurator resolves it. A100-SXM4 rows use its
``a100_sxm`` database (TensorRT-LLM 1.0.0, the only one it ships for A100), H100 rows
``h100_sxm`` (TensorRT-LLM 1.3.0rc20, the current one); rows 788-795 say "H100 80G" without
the form factor and are taken as SXM. Where the batch's KV cache does not fit the GPUs,
AIConfigurator refuses the agg estimate and flags the static one (``status``); those rows are
left out of the error summary (the engine really queued the excess requests).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "data" / "reference" / "serving_under_load.csv"
OUT = ROOT / "data" / "reference" / "peer_predictions_aiconfigurator.csv"
README = ROOT / "data" / "reference" / "README.md"
FIRST_ROW, LAST_ROW = 1, 795  # the NIM / TensorRT-LLM rows; 796-803 are SGLang / vLLM
AIC_VERSION = "0.12.0"
MODES = ("static", "agg")
HIGH_LOAD = 0.9  # at or above this share of the sweep's measured capacity is "high" load
METRICS = {  # ours -> (measured column, predicted column)
    "ttft_mean": ("ttft_mean_ms", "predicted_ttft_ms"),
    "tpot_mean": ("tpot_mean_ms", "predicted_tpot_ms"),
    "output_tokens_per_s": ("output_tokens_per_s", "predicted_output_tokens_per_s"),
}
SYSTEMS = {  # gpu column prefix -> (AIConfigurator system, TensorRT-LLM database version)
    "A100-SXM4": ("a100_sxm", "1.0.0"),
    "H100-SXM5": ("h100_sxm", "1.3.0rc20"),
    "H100 80G": ("h100_sxm", "1.3.0rc20"),
}
MODELS = {
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Meta-Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
}
QUANT = {"fp16": ("bfloat16", "bfloat16"), "bf16": ("bfloat16", "bfloat16"), "fp8": ("fp8", "fp8")}
COLUMNS = [
    "row_id",
    "mode",
    "status",
    "aiconfigurator_version",
    "predicted_on",
    "system",
    "backend",
    "backend_version",
    "model_path",
    "tp_size",
    "gemm_quant_mode",
    "kvcache_quant_mode",
    "fmha_quant_mode",
    "isl",
    "osl",
    "batch_size",
    "ctx_tokens",
    "predicted_ttft_ms",
    "predicted_tpot_ms",
    "predicted_output_tokens_per_s",
    "predicted_memory_gb",
    "notes",
]
BEGIN = "<!-- peers_aiconfigurator.py: begin -->"
END = "<!-- peers_aiconfigurator.py: end -->"


class RowError(ValueError):
    """A measured row AIConfigurator cannot express (which row, why)."""


def read_measured(path: Path = MEASURED) -> dict[int, dict[str, str]]:
    """The rows of serving_under_load.csv by row_id."""
    with path.open(newline="", encoding="utf-8") as f:
        return {int(r["row_id"]): r for r in csv.DictReader(f)}


def setting(row: dict[str, str]) -> dict[str, Any]:
    """The cli_estimate settings of one measured row (raises RowError if it has none)."""
    rid = row["row_id"]
    system = next((v for k, v in SYSTEMS.items() if row["gpu"].startswith(k)), None)
    if system is None:
        raise RowError(f"row {rid}: GPU {row['gpu']!r} has no AIConfigurator system")
    model = MODELS.get(row["model_hf"])
    if model is None:
        raise RowError(f"row {rid}: model {row['model_hf']!r} is not mapped")
    quant = QUANT.get(row["precision"])
    if quant is None:
        raise RowError(f"row {rid}: precision {row['precision']!r} is not mapped")
    if row["engine"].find("TensorRT-LLM") < 0 or row["load_kind"] != "concurrency":
        raise RowError(f"row {rid}: not a TensorRT-LLM run at a fixed concurrency")
    if (row["pp"] or "1") != "1" or (row["replicas"] or "1") != "1":
        raise RowError(f"row {rid}: pipeline parallelism or replicas are not modelled here")
    return {
        "model_path": model,
        "system_name": system[0],
        "backend_name": "trtllm",
        "backend_version": system[1],
        "tp_size": int(row["tp"]),
        "gemm_quant_mode": quant[0],
        "kvcache_quant_mode": quant[1],
        "isl": int(float(row["input_tokens"])),
        "osl": int(float(row["output_tokens"])),
        "batch_size": int(float(row["load"])),
    }


def _mapping_note(row: dict[str, str], s: dict[str, Any]) -> str:
    notes = [f"{row['model_hf']} as {s['model_path']} (same layer shapes)"]
    if row["precision"] in ("fp16", "bf16"):
        notes.append(f"{row['precision']} as bfloat16 GEMM and KV cache")
    else:
        notes.append("fp8 as fp8 GEMM + fp8 KV cache (KV dtype not stated in the row)")
    if row["gpu"].startswith("H100 80G"):
        notes.append("'H100 80G' taken as h100_sxm")
    return "; ".join(notes)


def predict_row(row: dict[str, str], mode: str, today: str) -> dict[str, Any]:
    """AIConfigurator's prediction of one measured row in one mode (a CSV row)."""
    from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found]

    s = setting(row)
    out: dict[str, Any] = {
        "row_id": int(row["row_id"]),
        "mode": mode,
        "aiconfigurator_version": AIC_VERSION,
        "predicted_on": today,
        "system": s["system_name"],
        "backend": s["backend_name"],
        "backend_version": s["backend_version"],
        **{k: s[k] for k in ("model_path", "tp_size", "gemm_quant_mode", "kvcache_quant_mode")},
        **{k: s[k] for k in ("isl", "osl", "batch_size")},
        "ctx_tokens": s["isl"] if mode == "agg" else "",
    }
    notes = [_mapping_note(row, s)]
    try:
        r = cli_estimate(mode=mode, **s)
    except RuntimeError as exc:
        if "OOM" not in str(exc):
            raise
        out.update(status="over_memory", fmha_quant_mode="")
        notes.append(
            f"no agg estimate: AIConfigurator finds {s['batch_size']} requests x "
            f"({s['isl']}+{s['osl']}) tokens over the GPUs' memory (its OOM refusal)"
        )
        return {**out, "notes": "; ".join(notes)}
    status = "ok"
    if mode == "static" and r.summary is not None and r.summary.check_oom():
        status = "over_memory"
        notes.append("AIConfigurator flags the batch as over the GPUs' memory (OOM)")
    elif r.kv_cache_warning:
        status = "over_kv_cache"
        notes.append("AIConfigurator: batch over its estimated KV cache capacity")
    out.update(
        status=status,
        fmha_quant_mode=str(r.raw.get("fmha", "")),
        predicted_ttft_ms=round(float(r.ttft), 4),
        predicted_tpot_ms=round(float(r.tpot), 4),
        predicted_output_tokens_per_s=round(float(r.tokens_per_second), 4),
        predicted_memory_gb=round(float(r.raw.get("memory", 0.0)), 3),
    )
    if str(r.raw.get("version")) != s["backend_version"] or r.raw.get("system") != s["system_name"]:
        raise RuntimeError(f"row {row['row_id']}: AIConfigurator answered for another database")
    return {**out, "notes": "; ".join(notes)}


def predict_all(measured: dict[int, dict[str, str]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every expressible row of FIRST_ROW..LAST_ROW in every mode; the rows it cannot express."""
    import logging

    logging.disable(logging.WARNING)  # its database loader warns about fallback rows at length
    today = date.today().isoformat()
    rows, skipped = [], []
    for rid in range(FIRST_ROW, LAST_ROW + 1):
        row = measured.get(rid)
        if row is None:
            skipped.append(f"row {rid}: not in {MEASURED.name}")
            continue
        for mode in MODES:
            try:
                rows.append(predict_row(row, mode, today))
            except RowError as exc:
                skipped.append(str(exc))
                break
    return rows, skipped


def write_predictions(rows: Sequence[dict[str, Any]], path: Path = OUT) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})


def read_predictions(path: Path = OUT) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _percentile(values: Sequence[float], q: float) -> float:
    """numpy's default (linear) percentile."""
    v = sorted(values)
    if not v:
        return math.nan
    pos = (len(v) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def sweep_key(row: dict[str, str]) -> tuple[str, ...]:
    """One sweep: a configuration at one input/output shape, over its concurrencies."""
    keys = ("source_id", "gpu", "model_hf", "precision", "tp", "input_tokens", "output_tokens")
    return tuple(row[k] for k in keys)


def load_bands(measured: dict[int, dict[str, str]]) -> dict[int, str]:
    """ "high" at or above 90% of the sweep's highest measured output throughput, else "low"."""
    top: dict[tuple[str, ...], float] = {}
    rows = [r for rid, r in measured.items() if FIRST_ROW <= rid <= LAST_ROW]
    for r in rows:
        top[sweep_key(r)] = max(top.get(sweep_key(r), 0.0), float(r["output_tokens_per_s"]))
    return {
        int(r["row_id"]): "high"
        if float(r["output_tokens_per_s"]) >= HIGH_LOAD * top[sweep_key(r)]
        else "low"
        for r in rows
    }


def summary(
    predictions: Iterable[dict[str, str]], measured: dict[int, dict[str, str]]
) -> list[dict[str, Any]]:
    """Per mode and metric, overall, per load band (low, high) and per system: the number of points,
    median and 90th percentile of |predicted / measured - 1|, and the median signed error,
    over the rows AIConfigurator predicts within its memory (status "ok")."""
    bands = load_bands(measured)
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for p in predictions:
        if p["status"] != "ok":
            continue
        row = measured[int(p["row_id"])]
        for metric, (mcol, pcol) in METRICS.items():
            if not row[mcol] or not p[pcol]:
                continue
            err = float(p[pcol]) / float(row[mcol]) - 1.0
            band = bands[int(p["row_id"])]
            for system, load in (("all", "all"), ("all", band), (p["system"], "all")):
                groups.setdefault((p["mode"], metric, system, load), []).append(err)
    out = []
    for (mode, metric, system, band), errs in sorted(groups.items()):
        abs_errs = [abs(e) for e in errs]
        out.append(
            {
                "mode": mode,
                "metric": metric,
                "system": system,
                "load": band,
                "points": len(errs),
                "median_abs": _percentile(abs_errs, 50),
                "p90_abs": _percentile(abs_errs, 90),
                "median_signed": _percentile(errs, 50),
            }
        )
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x == x else "—"


def markdown(stats: Sequence[dict[str, Any]], predictions: Sequence[dict[str, str]]) -> str:
    counts: dict[tuple[str, str], int] = {}
    for p in predictions:
        counts[(p["mode"], p["status"])] = counts.get((p["mode"], p["status"]), 0) + 1
    lines = [
        "| mode | metric | system | load | points | median abs | P90 abs | median signed |",
        "|---|---|---|---|--:|--:|--:|--:|",
    ]
    order = {"all": 0, "low": 1, "high": 2}

    def key(s: dict[str, Any]) -> tuple[Any, ...]:
        return (
            s["mode"] != "static",
            s["metric"],
            s["system"] != "all",
            s["system"],
            order[s["load"]],
        )

    for s in sorted(stats, key=key):
        lines.append(
            f"| {s['mode']} | {s['metric']} | {s['system']} | {s['load']} | {s['points']} | "
            f"{_pct(s['median_abs'])} | {_pct(s['p90_abs'])} | {_pct(s['median_signed'])} |"
        )
    status = ", ".join(f"{m} {st}: {n}" for (m, st), n in sorted(counts.items()))
    return "\n".join(lines) + f"\n\nRows per mode and status: {status}."


def write_readme(text: str, path: Path = README) -> None:
    """Replace the generated table of the README's AIConfigurator section (between markers)."""
    doc = path.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no '{BEGIN}' ... '{END}' markers to write the table between")
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--summary-only", action="store_true", help="summarise the existing CSV")
    ap.add_argument("--write-readme", action="store_true", help="write the table into README")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    measured = read_measured()
    if not args.summary_only:
        started = time.perf_counter()
        rows, skipped = predict_all(measured)
        write_predictions(rows)
        print(
            f"{len(rows)} predictions in {time.perf_counter() - started:.0f} s -> "
            f"{OUT.relative_to(ROOT)}; rows not expressible: {len(skipped)}",
            file=sys.stderr,
        )
        for s in skipped:
            print(f"  {s}", file=sys.stderr)
    try:
        predictions = read_predictions()
    except FileNotFoundError:
        print(f"error: {OUT} is missing: run without --summary-only first", file=sys.stderr)
        return 1
    stats = summary(predictions, measured)
    text = markdown(stats, predictions)
    print(json.dumps(stats, indent=1) if args.json else text)
    if args.write_readme:
        write_readme(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
