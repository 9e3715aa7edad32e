"""The mypyc-compiled copy of a module (built by setup.py), loaded only when it matches its source.

setup.py compiles a copy of ``planner/latency/step.py`` and of ``planner/simulate/engine.py``,
each stamped with the SHA-256 of its source. Each of those modules asks here for its copy and
switches to it only when the stamp matches the source it runs from, so an edited source is never
shadowed by an older build.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import warnings
from pathlib import Path
from types import ModuleType

#: set (to anything) to run the pure-Python sources even where the compiled copies are built
PURE_PYTHON = "PLANNER_PURE_PYTHON"


def compiled_twin(native: str, source: Path, what: str) -> ModuleType | None:
    """The module ``native`` (the compiled copy of ``source``), or None: not built, turned off by
    ``PLANNER_PURE_PYTHON``, or built from another version of ``source`` (an edit since the
    install). ``what`` names it in the warnings, which point at the caller's caller (the module
    that asks, as it is imported)."""
    if os.environ.get(PURE_PYTHON):
        return None
    try:
        module = importlib.import_module(native)
    except ImportError:
        return None
    except ValueError as error:  # built against another librt than the one installed
        warnings.warn(
            f"planner: the compiled {what} does not load ({error}); running the pure-Python "
            "one (reinstall planner to rebuild it)",
            stacklevel=3,
        )
        return None
    if getattr(module, "SOURCE_SHA256", None) != hashlib.sha256(source.read_bytes()).hexdigest():
        warnings.warn(
            f"planner: the compiled {what} was built from another version of {source}; "
            "running the pure-Python one (reinstall planner to rebuild it)",
            stacklevel=3,
        )
        return None
    return module
