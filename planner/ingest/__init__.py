"""Ingestion: request logs (CSV, JSON Lines, Parquet) into the store."""

from planner.ingest.formats import BUILTIN_FORMATS, FORMAT_NAMES, TimeKind, TimeSpec, TimeUnit
from planner.ingest.pipeline import IngestOptions, IngestResult, ingest_file

__all__ = [
    "BUILTIN_FORMATS",
    "FORMAT_NAMES",
    "IngestOptions",
    "IngestResult",
    "TimeKind",
    "TimeSpec",
    "TimeUnit",
    "ingest_file",
]
