"""The use-case layer: one module per user action: ``ingest``, ``datasets``, ``predict``,
``calibrate``, ``simulate``, ``forecast`` and ``forecasts`` (the stored ones), ``recommend``
(``recommend_background`` runs it for the dashboard) and ``recommendations``, ``report``,
``prices``, ``bench_run``, ``bench_import``, ``bench_runs``, ``bench_compare``, ``overview``;
``load`` holds the loaders several of them share, ``_bench`` what the bench ones share.

Each action is one function that takes a typed request (a frozen dataclass that the CLI command
and the dashboard page both build from their inputs) and returns a typed result that both
render. The function checks the request, loads what it needs from the store through the
``sessions`` it is given (opened only after the inputs are checked), calls the pure core
(``latency``, ``simulate``, ``recommend``, ``pricing``, ``report``) on values, stores what the
action keeps, and returns values. Shells never open sessions or resolve profiles themselves.

What may import what is in docs/architecture.md and pyproject.toml's ``[tool.importlinter]``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

# Opens the store's session when called (the CLI opens the store named by --db / PLANNER_DB_URL
# only then; the dashboard its shared one); ``None`` inside means there is no store to read.
SessionScope: TypeAlias = "Callable[[], AbstractContextManager[Session | None]]"
