"""planner: the cheapest GPU fleet that meets your LLM serving latency targets."""

from __future__ import annotations

from functools import cache

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # The version is looked up on first use: importlib.metadata costs ~30 ms, which every
    # `planner` command (and `planner --help`) would otherwise pay at start-up.
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("planner")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"
