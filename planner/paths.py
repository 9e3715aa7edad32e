"""Where planner finds its bundled data (catalogs, reference measurements, samples)."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "PLANNER_DATA_DIR"


def data_dir() -> Path:
    """``$PLANNER_DATA_DIR``, else the ``data/`` folder of the source tree planner runs from."""
    override = os.environ.get(DATA_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parent.parent / "data"
