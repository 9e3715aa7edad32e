"""How far the latency model is from measured single operators (Vidur's A100/H100 profiles).

Prints Markdown tables of the signed and absolute median errors of the bundled
``data/reference/operator_timings.csv`` under the bundled ``trtllm-default`` profile: by GPU,
operator family and token bucket, then by GPU, model and operator. Paste the output before and
after a change to ``planner/latency/model.py``.

    python benchmarks/operator_errors.py
"""

from __future__ import annotations

import statistics

from planner.latency.catalog import load_catalog
from planner.latency.operators import (
    BUCKETS,
    OPERATORS,
    markdown_table,
    point_errors,
    read_operator_points,
    summarize,
)
from planner.latency.profile import load_bundled_profiles

PROFILE = "trtllm-default"


def main() -> None:
    profile = next(p for p in load_bundled_profiles() if p.name == PROFILE)
    errors = point_errors(read_operator_points(), profile, load_catalog())
    print(f"Operator errors under profile {PROFILE} ({len(errors)} points)\n")
    print(markdown_table(summarize(errors)))

    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for e in errors:
        p = e.point
        groups.setdefault((p.gpu, p.model, p.operator, p.bucket), []).append(e.error)
    order = {name: i for i, name in enumerate(OPERATORS + BUCKETS)}
    print("\n| GPU | model | operator | tokens | points | signed median | median abs |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for (gpu, model, operator, bucket), values in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], order[kv[0][2]], order[kv[0][3]])
    ):
        signed = 100 * statistics.median(values)
        absolute = 100 * statistics.median(abs(v) for v in values)
        print(
            f"| {gpu} | {model} | {operator} | {bucket} | {len(values)} | "
            f"{signed:+.0f}% | {absolute:.0f}% |"
        )


if __name__ == "__main__":
    main()
