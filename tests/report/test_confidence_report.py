"""The confidence margin in the finance reports: the figures build takes from a stored
recommendation's ``confidence`` object, the sentence among the key assumptions, and the PDF's
and the workbook's lines."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from planner.report.build import _confidence_sentence, _confidence_summary, stored_recommendation
from planner.report.excel import build_workbook
from planner.report.model import Report
from planner.report.pdf import report_html
from tests.report.conftest import example_report

CONFIDENCE = {
    "level": 0.9,
    "accuracy_file": "data/calibration/accuracy.json",
    "targets": {
        "ttft": {"target_s": 2.0, "point_p99_s": 0.73, "upper_s": 1.014, "model_factor": 1.35},
        "tpot": {"target_s": 0.2, "point_p99_s": 0.053, "upper_s": 0.072, "model_factor": 1.35},
        "e2e": {"target_s": None, "point_p99_s": 14.4, "upper_s": 19.6, "model_factor": 1.35},
    },
    "margin_usd_per_month": 547.5,
    "point_estimate_fleet": {"monthly_usd": 1460.0, "found": "tightened (step 1)"},
}


def stored_with(confidence: dict[str, Any] | None) -> Any:
    data: dict[str, Any] = {
        "request": {"constraints": {"model": "llama-3.1-8b"}, "targets": {"slos": {}}},
        "winner": {"id": 1},
        "plan": {"chosen": {}},
        "hourly": {"hour_start": [0.0], "requests": [1.0], "replicas": [1.0], "instances": [1.0]},
    }
    if confidence is not None:
        data["confidence"] = copy.deepcopy(confidence)
    return stored_recommendation(7, datetime(2026, 12, 6, tzinfo=UTC), data)


def test_summary_and_sentence_from_the_stored_margin() -> None:
    stored = stored_with(CONFIDENCE)
    summary = _confidence_summary(stored)
    assert summary["confidence"] == 0.9
    assert summary["p99_ttft_upper_ms"] == pytest.approx(1014.0)
    assert summary["margin_usd_per_month"] == 547.5
    assert summary["point_estimate_monthly_usd"] == 1460.0
    sentence = _confidence_sentence(stored)
    assert sentence is not None
    assert "hold at 90% confidence" in sentence
    assert "P99 TTFT 730 ms simulated, at most 1,014 ms (target 2,000 ms)" in sentence
    assert "E2E" not in sentence  # no target
    assert "The margin costs $547.50 a month" in sentence and "($1,460.00 a month)" in sentence


def test_no_margin_and_older_results() -> None:
    off = stored_with({**CONFIDENCE, "level": None, "margin_usd_per_month": 0.0})
    assert _confidence_summary(off)["confidence"] is None
    assert _confidence_summary(off)["margin_usd_per_month"] is None
    assert "no confidence margin" in (_confidence_sentence(off) or "")
    old = stored_with(None)  # stored before the margin existed
    assert _confidence_sentence(old) is None
    assert set(_confidence_summary(old).values()) == {None}


def with_margin(report: Report) -> Report:
    summary = {**report.summary, **_confidence_summary(stored_with(CONFIDENCE))}
    return replace(report, summary=summary)


def test_pdf_states_the_bounds_and_the_margin() -> None:
    html = report_html(with_margin(example_report()), {})
    assert "Confidence margin" in html and "$547.50" in html and "$1,460.00" in html
    assert "at most 1,014 ms at 90% confidence" in html


def test_workbook_has_the_confidence_lines() -> None:
    book = build_workbook(with_margin(example_report()))
    lines = {
        row[0]: row[1]
        for row in book["Summary"].iter_rows(values_only=True)
        if row and isinstance(row[0], str)
    }
    assert lines["Confidence"] == 0.9
    assert lines["Confidence margin"] == 547.5
    assert lines["Fleet on point estimates"] == 1460.0
    assert lines["P99 time to first token, upper bound"] == pytest.approx(1014.0)
    plain = build_workbook(example_report())
    assert not any(
        row and row[0] == "Confidence" for row in plain["Summary"].iter_rows(values_only=True)
    )
