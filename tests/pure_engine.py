"""The replica loop as pure Python, for tests that watch or patch its internals.

``planner.simulate.engine`` runs its mypyc-compiled twin when one was built (see setup.py), and a
compiled class takes neither a Python subclass nor a patched method. These helpers load the same
source as an ordinary module and put its names where the compiled ones were.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from types import ModuleType

import pytest

import planner.simulate.engine as engine

PURE_NAME = "planner.simulate._engine_pure"
NATIVE_NAME = "planner.simulate._engine_native"


@cache
def load_pure_engine() -> ModuleType:
    """``engine.py`` imported as pure Python under a name of its own (it never switches there)."""
    if engine.IMPLEMENTATION == "pure Python":
        return engine
    # the switch lends every name but the module's own dunders: __file__ is still engine.py
    spec = importlib.util.spec_from_file_location(PURE_NAME, engine.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[PURE_NAME] = module  # dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def use_pure_engine(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Every name the compiled engine lent to a planner or test module, pure for this test."""
    pure = load_pure_engine()
    if pure is engine:
        return pure
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if not name.startswith(("planner.", "tests.")) or module is pure:
            continue
        for attribute, value in list(vars(module).items()):
            if getattr(value, "__module__", None) == NATIVE_NAME and hasattr(pure, attribute):
                monkeypatch.setattr(module, attribute, getattr(pure, attribute))
    return pure
