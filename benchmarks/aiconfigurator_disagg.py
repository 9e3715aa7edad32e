"""NVIDIA AIConfigurator's aggregated vs disaggregated choices on 8 GPUs, recorded as reference data
(issue 33 deliverable 5: the cases planner's disaggregated search is checked against).

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0
    /tmp/aic/bin/python benchmarks/aiconfigurator_disagg.py            # all cases (about 10 min)
    /tmp/aic/bin/python benchmarks/aiconfigurator_disagg.py --models meta-llama/Meta-Llama-3.1-8B \
        --systems h200_sxm --shapes 4000/500 --out /tmp/one.csv        # a subset
    python benchmarks/aiconfigurator_disagg.py --summary-only [--write-readme]  # table from the CSV

It does not import planner (it runs in AIConfigurator's own virtual environment); the summary needs
only the standard library. Two kinds of rows (``kind`` column):

- ``search``: one ``aiconfigurator cli default`` process per case (model x system x ISL/OSL, 8 GPUs,
  its default targets TTFT 2000 ms and TPOT 30 ms, backend trtllm), run as a user runs it and timed
  from start to exit (``search_wall_s``; ``search_reported_s`` is its own "All experiments
  completed in" figure, which leaves out the Python start-up). For each mode (agg, disagg) the row
  is its rank-1 configuration, read from the ``best_config_topn.csv`` it saves, and ``chosen``
  marks the mode it recommends; ``chosen_by`` is the winner's tokens/s/GPU over the loser's
  (its "1.12x better").
- ``estimate``: ``aiconfigurator.cli.api.cli_estimate`` on fixed configurations of
  Llama-3.1-70B, 8 x H200, 4000/500 (the configurations planner is compared on exactly): aggregated
  2 x TP4 at the search's batch size, and disaggregated 1 prefill TP4 + 1 decode TP4 at several
  decode batch sizes, including the largest that meets TPOT 30 ms.

Throughput columns are for the whole 8-GPU cluster, as AIConfigurator ranks them
(``tokens/s/gpu_cluster``: idle GPUs count when the replica size does not divide 8); request rate
and concurrency are the replicas' sum. Worker counts of a disaggregated row are per replica
(``xPyD``), as AIConfigurator reports them: the fleet has ``replicas`` times as many.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "reference" / "aiconfigurator_disagg.csv"
AIC_VERSION = "0.12.0"
BACKEND = "trtllm"
TOTAL_GPUS = 8
# `aiconfigurator cli default`'s targets when --ttft / --tpot are not given (its --help and
# aiconfigurator.cli.api.cli_default's defaults); passed explicitly so the command shows them.
TTFT_TARGET_MS = 2000.0
TPOT_TARGET_MS = 30.0
MODELS = (
    "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Meta-Llama-3.1-8B",
    "Qwen/Qwen3-30B-A3B",  # MoE, 128 experts, top-8, BF16 (planner's qwen3-30b-a3b)
    "openai/gpt-oss-120b",  # MoE, 128 experts, top-4, MXFP4 experts (planner's gpt-oss-120b)
)
SYSTEMS = ("h200_sxm", "h100_sxm")
SHAPES = ((4000, 500), (1000, 1000))
# The fixed configurations of the first data point (Llama-3.1-70B BF16, 8 x H200).
ESTIMATE_MODEL = "meta-llama/Meta-Llama-3.1-70B"
ESTIMATE_SYSTEM, ESTIMATE_SHAPE = "h200_sxm", (4000, 500)
ESTIMATE_AGG_TP, ESTIMATE_AGG_REPLICAS = 4, 2
ESTIMATE_DISAGG_TP = 4
ESTIMATE_DECODE_BATCHES = (16, 32, 64, 128)
COLUMNS = [
    "case_id",
    "kind",
    "mode",
    "chosen",
    "chosen_by",
    "model",
    "system",
    "backend",
    "backend_version",
    "aiconfigurator_version",
    "total_gpus",
    "isl",
    "osl",
    "ttft_target_ms",
    "tpot_target_ms",
    "replicas",
    "gpus_per_replica",
    "gpus_used",
    "tp",
    "pp",
    "dp",
    "moe_tp",
    "moe_ep",
    "batch",
    "ctx_tokens",
    "prefill_workers_per_replica",
    "prefill_tp",
    "prefill_dp",
    "prefill_moe_ep",
    "prefill_batch",
    "decode_workers_per_replica",
    "decode_tp",
    "decode_dp",
    "decode_moe_ep",
    "decode_batch",
    "pd_ratio",
    "gemm_quant",
    "kv_quant",
    "fmha_quant",
    "moe_quant",
    "concurrency",
    "request_rate",
    "tokens_s",
    "tokens_s_gpu",
    "tokens_s_user",
    "ttft_ms",
    "tpot_ms",
    "request_latency_ms",
    "memory_gb",
    "search_wall_s",
    "search_reported_s",
    "command",
    "predicted_on",
    "notes",
]
README = ROOT / "data" / "reference" / "README.md"
BEGIN = "<!-- aiconfigurator_disagg.py: begin -->"
END = "<!-- aiconfigurator_disagg.py: end -->"
_CHOSEN = re.compile(r"Best Experiment Chosen:\s*(\w+) at ([\d.,]+) tokens/s/gpu")
_COMPLETED = re.compile(r"All experiments completed in ([\d.]+) seconds")


def case_id(model: str, system: str, isl: int, osl: int) -> str:
    """A short stable id: model's last path part, system, ISL/OSL."""
    return f"{model.rsplit('/', 1)[-1].lower()}_{system}_{isl}_{osl}"


def cli_command(model: str, system: str, isl: int, osl: int, save_dir: str) -> list[str]:
    """The `aiconfigurator cli default` command of one case (its executable beside this Python)."""
    exe = Path(sys.executable).with_name("aiconfigurator")
    return [
        str(exe),
        "cli",
        "default",
        "--model-path",
        model,
        "--total-gpus",
        str(TOTAL_GPUS),
        "--system",
        system,
        "--backend",
        BACKEND,
        "--isl",
        str(isl),
        "--osl",
        str(osl),
        "--ttft",
        f"{TTFT_TARGET_MS:g}",
        "--tpot",
        f"{TPOT_TARGET_MS:g}",
        "--no-color",
        "--save-dir",
        save_dir,
    ]


def _num(value: str | float | int) -> float:
    return float(value) if value not in ("", None) else math.nan


def _int(value: str | float | int) -> int:
    return round(float(value))


def _dim(value: str | float | int | None) -> int:
    """A parallelism degree; dense models' MoE degrees are None (estimate) or empty: 1."""
    if value in ("", None) or _num(value) != _num(value):
        return 1
    return _int(value)


def best_row(path: Path) -> dict[str, str]:
    """Rank 1 of a saved best_config_topn.csv: within the TPOT target, the most tokens/s/GPU of
    the cluster."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if _num(r["tpot"]) <= TPOT_TARGET_MS]
    if not rows:
        raise RuntimeError(f"{path}: no configuration within TPOT {TPOT_TARGET_MS:g} ms")
    return max(rows, key=lambda r: _num(r["tokens/s/gpu_cluster"]))


def _cluster(r: dict[str, Any]) -> dict[str, Any]:
    """Replicas on TOTAL_GPUS and the cluster's figures, as its report computes them."""
    gpus_per_replica = _int(r["num_total_gpus"])
    replicas = TOTAL_GPUS // gpus_per_replica
    per_gpu = _num(r["tokens/s/gpu"]) * replicas * gpus_per_replica / TOTAL_GPUS
    return {
        "replicas": replicas,
        "gpus_per_replica": gpus_per_replica,
        "gpus_used": replicas * gpus_per_replica,
        "concurrency": round(_num(r["concurrency"]) * replicas, 3),
        "request_rate": round(_num(r["request_rate"]) * replicas, 4),
        "tokens_s": round(_num(r["tokens/s"]) * replicas, 3),
        "tokens_s_gpu": round(per_gpu, 3),
        "tokens_s_user": round(_num(r["tokens/s/user"]), 3),
        "ttft_ms": round(_num(r["ttft"]), 3),
        "tpot_ms": round(_num(r["tpot"]), 3),
        "request_latency_ms": round(_num(r["request_latency"]), 3),
    }


def agg_fields(r: dict[str, Any]) -> dict[str, Any]:
    """The CSV fields of an aggregated result row (search CSV row or estimate dict)."""
    return {
        "mode": "agg",
        "backend_version": r["version"],
        **{k: _dim(r[k]) for k in ("tp", "pp", "dp", "moe_tp", "moe_ep")},
        "batch": _int(r["bs"]),
        "ctx_tokens": _int(r["ctx_tokens"]),
        "gemm_quant": r["gemm"],
        "kv_quant": r["kvcache"],
        "fmha_quant": r["fmha"],
        "moe_quant": r["moe"],
        "memory_gb": round(_num(r["memory"]), 2),
        **_cluster(r),
    }


def disagg_fields(r: dict[str, Any]) -> dict[str, Any]:
    """The CSV fields of a disaggregated result row (search CSV row or estimate dict)."""
    p, d = _int(r["(p)workers"]), _int(r["(d)workers"])
    if _dim(r["(p)pp"]) != 1 or _dim(r["(d)pp"]) != 1:
        # Its default search keeps PP 1 for both roles; the columns below assume it.
        raise RuntimeError(f"disaggregated row with pipeline parallelism: {r['(p)parallel']}")
    g = math.gcd(p, d)
    return {
        "mode": "disagg",
        "backend_version": r["(p)version"],
        "prefill_workers_per_replica": p,
        "prefill_tp": _dim(r["(p)tp"]),
        "prefill_dp": _dim(r["(p)dp"]),
        "prefill_moe_ep": _dim(r["(p)moe_ep"]),
        "prefill_batch": _int(r["(p)bs"]),
        "decode_workers_per_replica": d,
        "decode_tp": _dim(r["(d)tp"]),
        "decode_dp": _dim(r["(d)dp"]),
        "decode_moe_ep": _dim(r["(d)moe_ep"]),
        "decode_batch": _int(r["(d)bs"]),
        "pd_ratio": f"{p // g}:{d // g}",
        "gemm_quant": r["(p)gemm"],
        "kv_quant": r["(p)kvcache"],
        "fmha_quant": r["(p)fmha"],
        "moe_quant": r["(p)moe"],
        "memory_gb": f"{_num(r['(p)memory']):.2f}/{_num(r['(d)memory']):.2f}",
        **_cluster(r),
    }


def _base(model: str, system: str, isl: int, osl: int, today: str) -> dict[str, Any]:
    return {
        "case_id": case_id(model, system, isl, osl),
        "model": model,
        "system": system,
        "backend": BACKEND,
        "aiconfigurator_version": AIC_VERSION,
        "total_gpus": TOTAL_GPUS,
        "isl": isl,
        "osl": osl,
        "ttft_target_ms": TTFT_TARGET_MS,
        "tpot_target_ms": TPOT_TARGET_MS,
        "predicted_on": today,
    }


def run_search(model: str, system: str, isl: int, osl: int, today: str) -> list[dict[str, Any]]:
    """One `cli default` run: its rank-1 agg and disagg rows, which it chose, and its wall time."""
    with tempfile.TemporaryDirectory(prefix="aic_") as tmp:
        cmd = cli_command(model, system, isl, osl, tmp)
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        log = proc.stdout + proc.stderr
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{log[-3000:]}")
        chosen = _CHOSEN.search(log)
        completed = _COMPLETED.search(log)
        if chosen is None or completed is None:
            raise RuntimeError(f"{shlex.join(cmd)}: no 'Best Experiment Chosen' in its output")
        rows = []
        for mode, fields in (("agg", agg_fields), ("disagg", disagg_fields)):
            found = list(Path(tmp).glob(f"**/{mode}/best_config_topn.csv"))
            if len(found) != 1:
                raise RuntimeError(f"{shlex.join(cmd)}: expected one {mode}/best_config_topn.csv")
            rows.append(fields(best_row(found[0])))
    best = {r["mode"]: r["tokens_s_gpu"] for r in rows}
    winner = chosen.group(1)
    # Its printed pick must be the row read back (same rank 1, same figure to its 2 decimals).
    if winner not in best or abs(best[winner] - float(chosen.group(2).replace(",", ""))) > 0.01:
        raise RuntimeError(f"{shlex.join(cmd)}: chose {chosen.group(0)!r}, CSV says {best}")
    loser = "disagg" if winner == "agg" else "agg"
    shown = shlex.join(["aiconfigurator", *cmd[1:-2]])  # without its executable path and --save-dir
    out = []
    for r in rows:
        out.append(
            {
                **_base(model, system, isl, osl, today),
                **r,
                "kind": "search",
                "chosen": r["mode"] == winner,
                "chosen_by": round(best[winner] / best[loser], 3) if r["mode"] == winner else "",
                "search_wall_s": round(wall, 1),
                "search_reported_s": float(completed.group(1)),
                "command": shown,
                "notes": "its rank-1 configuration of this mode within the targets",
            }
        )
    return out


def _estimate(**kwargs: Any) -> dict[str, Any]:
    from aiconfigurator.cli.api import cli_estimate  # type: ignore[import-not-found]

    return dict(cli_estimate(backend_name=BACKEND, **kwargs).get())


def run_estimates(search_rows: Sequence[dict[str, Any]], today: str) -> list[dict[str, Any]]:
    """cli_estimate on the fixed 70B / 8 x H200 / 4000-500 configurations."""
    isl, osl = ESTIMATE_SHAPE
    common = {"model_path": ESTIMATE_MODEL, "system_name": ESTIMATE_SYSTEM, "isl": isl, "osl": osl}
    base = {**_base(ESTIMATE_MODEL, ESTIMATE_SYSTEM, isl, osl, today), "kind": "estimate"}
    cid = base["case_id"]
    # The aggregated 2 x TP4 at the batch its search chose for TP4 (or 28 without a search row).
    agg_search = next(
        (
            r
            for r in search_rows
            if r["case_id"] == cid and r["mode"] == "agg" and r["tp"] == ESTIMATE_AGG_TP
        ),
        None,
    )
    batch = int(agg_search["batch"]) if agg_search else 28
    r = _estimate(mode="agg", tp_size=ESTIMATE_AGG_TP, batch_size=batch, ctx_tokens=isl, **common)
    rows = [
        {
            **base,
            **agg_fields(r),
            "command": (
                f"cli_estimate(mode='agg', model_path='{ESTIMATE_MODEL}', "
                f"system_name='{ESTIMATE_SYSTEM}', isl={isl}, osl={osl}, "
                f"tp_size={ESTIMATE_AGG_TP}, batch_size={batch}, ctx_tokens={isl})"
            ),
            "notes": (
                f"{ESTIMATE_AGG_REPLICAS} x TP{ESTIMATE_AGG_TP} replicas, batch {batch} each "
                "(the issue's first data point)"
            ),
        }
    ]

    # Disaggregated 1 prefill TP4 + 1 decode TP4: a few decode batches and the largest within TPOT.
    def disagg(decode_batch: int) -> dict[str, Any]:
        return _estimate(
            mode="disagg",
            tp_size=ESTIMATE_DISAGG_TP,
            prefill_tp_size=ESTIMATE_DISAGG_TP,
            prefill_batch_size=1,
            prefill_num_workers=1,
            decode_tp_size=ESTIMATE_DISAGG_TP,
            decode_batch_size=decode_batch,
            decode_num_workers=1,
            **common,
        )

    lo, hi = 1, 512  # bisect the largest decode batch within TPOT (TPOT rises with the batch)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if float(disagg(mid)["tpot"]) <= TPOT_TARGET_MS:
            lo = mid
        else:
            hi = mid - 1
    for decode_batch in sorted({*ESTIMATE_DECODE_BATCHES, lo}):
        d = disagg(decode_batch)
        note = "1 prefill TP4 (batch 1) + 1 decode TP4"
        if decode_batch == lo:
            note += f"; the largest decode batch within TPOT {TPOT_TARGET_MS:g} ms"
        rows.append(
            {
                **base,
                **disagg_fields(d),
                "command": (
                    f"cli_estimate(mode='disagg', model_path='{ESTIMATE_MODEL}', "
                    f"system_name='{ESTIMATE_SYSTEM}', isl={isl}, osl={osl}, prefill_tp_size=4, "
                    f"prefill_batch_size=1, prefill_num_workers=1, decode_tp_size=4, "
                    f"decode_batch_size={decode_batch}, decode_num_workers=1)"
                ),
                "notes": note,
            }
        )
    return rows


def write_rows(rows: Sequence[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in COLUMNS})


def read_rows(path: Path = OUT) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def layout(r: dict[str, str]) -> str:
    """A configuration in a few characters: '2 x TP4 bs28' or '1 x (4P TP1 + 1D TP4 bs128)'."""

    def par(tp: str, dp: str, ep: str) -> str:
        s = f"TP{tp}"
        if dp and dp != "1":
            s += f" DP{dp}"
        if ep and ep != "1":
            s += f" EP{ep}"
        return s

    if r["mode"] == "agg":
        return f"{r['replicas']} x {par(r['tp'], r['dp'], r['moe_ep'])} bs{r['batch']}"
    p = par(r["prefill_tp"], r["prefill_dp"], r["prefill_moe_ep"])
    d = par(r["decode_tp"], r["decode_dp"], r["decode_moe_ep"])
    p = f"{r['prefill_workers_per_replica']}P {p}"
    d = f"{r['decode_workers_per_replica']}D {d}"
    return f"{r['replicas']} x ({p} + {d} bs{r['decode_batch']})"


def markdown(rows: Sequence[dict[str, str]]) -> str:
    """The search rows as a Markdown table, one line per case and mode."""
    lines = [
        "| case | mode | chosen | configuration | tok/s/GPU | tok/s/user | TTFT ms | TPOT ms "
        "| req/s | search s |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        if r["kind"] != "search":
            continue
        chosen = f"yes ({float(r['chosen_by']):.2f}x)" if r["chosen"] == "True" else ""
        lines.append(
            f"| {r['case_id']} | {r['mode']} | {chosen} | {layout(r)} "
            f"| {float(r['tokens_s_gpu']):.1f} | {float(r['tokens_s_user']):.1f} "
            f"| {float(r['ttft_ms']):.0f} | {float(r['tpot_ms']):.1f} "
            f"| {float(r['request_rate']):.2f} | {r['search_wall_s']} |"
        )
    return "\n".join(lines)


def write_readme(text: str, path: Path = README) -> None:
    """Replace the generated table of the README's section (between its markers)."""
    doc = path.read_text(encoding="utf-8")
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{path}: no '{BEGIN}' ... '{END}' markers to write the table between")
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    path.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), help="Hugging Face ids")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), help="AIConfigurator systems")
    ap.add_argument("--shapes", nargs="+", default=[f"{i}/{o}" for i, o in SHAPES], help="ISL/OSL")
    ap.add_argument("--no-estimates", action="store_true", help="skip the fixed-configuration rows")
    ap.add_argument("--out", type=Path, default=OUT, help=f"CSV to write (default {OUT.name})")
    ap.add_argument(
        "--summary-only", action="store_true", help="print the table of the existing CSV"
    )
    ap.add_argument("--write-readme", action="store_true", help="write the table into the README")
    args = ap.parse_args(argv)
    if not args.summary_only:
        today = date.today().isoformat()
        rows: list[dict[str, Any]] = []
        for model in args.models:
            for system in args.systems:
                for shape in args.shapes:
                    isl, osl = (int(x) for x in shape.split("/"))
                    found = run_search(model, system, isl, osl, today)
                    rows.extend(found)
                    print(
                        f"{found[0]['case_id']}: {found[0]['search_wall_s']} s, chose "
                        f"{next(r['mode'] for r in found if r['chosen'])}",
                        file=sys.stderr,
                    )
        if not args.no_estimates:
            import logging

            logging.disable(
                logging.WARNING
            )  # its database loader warns about fallback rows at length
            rows.extend(run_estimates(rows, today))
        write_rows(rows, args.out)
        print(f"{len(rows)} rows -> {args.out}", file=sys.stderr)
    try:
        text = markdown(read_rows(args.out))
    except FileNotFoundError:
        print(f"error: {args.out} is missing: run without --summary-only first", file=sys.stderr)
        return 1
    print(text)
    if args.write_readme:
        write_readme(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
