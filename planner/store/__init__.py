"""The store: datasets and everything planner derives from them, in SQLite or PostgreSQL."""

from planner.store.audit import AuditEvent
from planner.store.db import Store, StoreBusyError, StoreConflictError, open_store
from planner.store.forecast_models import ForecastPoint, ForecastRun
from planner.store.models import Base, CalibrationProfile, Dataset, Request
from planner.store.price_models import PricePointRow, PriceSheetVersion
from planner.store.recommend_models import RecommendationRun

__all__ = [
    "AuditEvent",
    "Base",
    "CalibrationProfile",
    "Dataset",
    "ForecastPoint",
    "ForecastRun",
    "PricePointRow",
    "PriceSheetVersion",
    "RecommendationRun",
    "Request",
    "Store",
    "StoreBusyError",
    "StoreConflictError",
    "open_store",
]
