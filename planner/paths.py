"""Where planner finds its bundled data (catalogs, reference measurements, samples), and the
user's own catalog entries (``planner catalog add-model``)."""

from __future__ import annotations

import os
from pathlib import Path

from planner.config import planner_home

DATA_DIR_ENV = "PLANNER_DATA_DIR"


def data_dir() -> Path:
    """``$PLANNER_DATA_DIR``, else the ``data/`` folder of the source tree planner runs from."""
    override = os.environ.get(DATA_DIR_ENV)
    return Path(override) if override else Path(__file__).resolve().parent.parent / "data"


def user_catalog_dir() -> Path:
    """``$PLANNER_HOME/catalog`` (default ``./.planner/catalog``): the models a user added with
    ``planner catalog add-model``, merged over the bundled catalog."""
    return planner_home() / "catalog"
