"""Workload statistics derived from a dataset's requests."""

from planner.workload.summary import DatasetSummary, TokenStats, summarize

__all__ = ["DatasetSummary", "TokenStats", "summarize"]
