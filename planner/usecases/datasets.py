"""The stored datasets: ``planner datasets list|show|delete`` and the Request logs page's table,
summary, charts and delete. Each function reads (or deletes) in one session of ``sessions`` and
returns values; an unknown name is a :class:`~planner.errors.NotFoundError` naming the closest
ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planner.access import Action, require
from planner.errors import UsageError
from planner.store.queries import dataset_models as stored_dataset_models
from planner.store.queries import delete_dataset as delete_stored_dataset
from planner.store.queries import get_dataset
from planner.store.queries import list_datasets as stored_datasets
from planner.store.requests import model_counts
from planner.store.summaries import (
    arrivals_per_bucket,
    dataset_records,
    dataset_summary,
    model_split,
    token_counts,
)
from planner.usecases import SessionScope
from planner.usecases.audit import record
from planner.workload.charts import TokenColumn
from planner.workload.model_names import ModelResolution, resolve_models
from planner.workload.summary import DatasetSummary

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class DatasetView:
    """What ``planner datasets show`` prints of one dataset: where it came from, its
    summary (span, token lengths, request rates, per model too) and the catalog model each
    of its model names maps to (``models``; unmapped ones in ``models.skipped``)."""

    name: str
    format: str
    source_path: str
    sha256: str
    skipped_rows: int
    summary: DatasetSummary
    models: ModelResolution | None = None

    def catalog_model(self, log_name: str | None) -> str | None:
        """The catalog model log name ``log_name`` maps to (None: unmapped, or not known)."""
        return None if self.models is None else self.models.catalog_of.get(log_name)

    def to_dict(self) -> dict[str, Any]:
        header = {
            "name": self.name,
            "format": self.format,
            "source_path": self.source_path,
            "sha256": self.sha256,
            "skipped_rows": self.skipped_rows,
        }
        data = {**header, **self.summary.to_dict()}
        for group in data["by_model"]:
            # the summary names requests without a model "(none)"
            name = None if group["model"] == "(none)" else group["model"]
            group["catalog_model"] = self.catalog_model(name)
        if self.summary.model is not None or not self.summary.by_model:
            data["catalog_model"] = self.catalog_model(self.summary.model)
        if self.models is not None:
            data["models"] = self.models.to_dict()["log_names"]
        return data


def list_datasets(sessions: SessionScope, *, with_key: bool = False) -> list[dict[str, Any]]:
    """Every dataset as a row (:func:`planner.store.summaries.dataset_records`), oldest first;
    none without a store."""
    with sessions() as session:
        return dataset_records(session, with_key=with_key) if session is not None else []


def dataset_names(sessions: SessionScope) -> list[str]:
    """The names of the stored datasets, oldest first; none without a store."""
    with sessions() as session:
        return [d.name for d in stored_datasets(session)] if session is not None else []


def dataset_model_names(name: str, sessions: SessionScope) -> list[str]:
    """The models named by the requests of the dataset called ``name``, sorted (requests
    without a model are left out)."""
    with sessions() as opened:
        session = _needed(opened)
        return sorted(m for m in stored_dataset_models(session, get_dataset(session, name)) if m)


def show_dataset(name: str, sessions: SessionScope) -> DatasetView:
    """The dataset called ``name`` and its summary."""
    with sessions() as opened:
        session = _needed(opened)
        dataset = get_dataset(session, name)
        counts = model_counts(session, dataset.id)
        return DatasetView(
            dataset.name,
            dataset.format,
            dataset.source_path,
            dataset.sha256,
            dataset.skipped_rows,
            dataset_summary(session, dataset),
            # shown, not used: an unmapped name is listed as such, never an error
            resolve_models(counts, unmapped="skip", source=f"dataset {dataset.name}"),
        )


def dataset_arrivals(name: str, bucket_s: int, sessions: SessionScope) -> pd.DataFrame:
    """Requests per ``bucket_s`` seconds of the dataset called ``name``
    (:func:`planner.store.summaries.arrivals_per_bucket`)."""
    with sessions() as opened:
        session = _needed(opened)
        return arrivals_per_bucket(session, get_dataset(session, name), bucket_s)


def dataset_token_counts(name: str, column: TokenColumn, sessions: SessionScope) -> pd.DataFrame:
    """How many requests have each input (or output) length (``column``)."""
    with sessions() as opened:
        session = _needed(opened)
        return token_counts(session, get_dataset(session, name), column)


def dataset_models(name: str, sessions: SessionScope) -> pd.DataFrame:
    """The dataset's requests and tokens by model, most requests first."""
    with sessions() as opened:
        session = _needed(opened)
        return model_split(session, get_dataset(session, name))


def delete_dataset(name: str, sessions: SessionScope) -> int:
    """Delete the dataset called ``name`` and its requests; the number of requests removed."""
    require(Action.DELETE)
    with sessions() as session:
        removed = delete_stored_dataset(_needed(session), name)
    record(sessions, Action.DELETE, f"dataset {name}", f"{removed:,} requests")
    return removed


def _needed(session: Session | None) -> Session:
    if session is None:
        raise UsageError("there is no store to read datasets from")
    return session
