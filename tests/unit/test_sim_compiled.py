"""The compiled replica loop (mypyc, built by setup.py) against its pure-Python source.

Both builds come from ``planner/simulate/engine.py``; the compiled one must give the same results
bit for bit, and must never run when it was built from another version of the source.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

import planner.simulate.engine as engine
from planner.simulate.engine import EngineConfig
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.workload import Workload
from tests.pure_engine import NATIVE_NAME, use_pure_engine
from tests.unit.test_sim_scaling import fleets, run, scenarios

# .ci/run builds the compiled engine and sets this: there, a pure-Python fallback is a failure
REQUIRE = "PLANNER_REQUIRE_COMPILED"
compiled_only = pytest.mark.skipif(
    engine.IMPLEMENTATION != "compiled" and not os.environ.get(REQUIRE),
    reason="the compiled engine is not built here (setup.py needs mypy and a C compiler)",
)


def pure_run(case: tuple[Workload, EngineConfig, FleetConfig]) -> str:
    with pytest.MonkeyPatch.context() as patch:
        use_pure_engine(patch)
        return run(Fleet, case).digest()


@compiled_only
def test_the_compiled_engine_is_in_use() -> None:
    assert engine.IMPLEMENTATION == "compiled"
    assert engine.Replica.__module__ == NATIVE_NAME
    assert engine.EngineConfig.__module__ == NATIVE_NAME


@compiled_only
@pytest.mark.parametrize("name", sorted(scenarios()))
def test_the_builds_agree_on_every_router_and_fleet_event(name: str) -> None:
    case = scenarios()[name]
    assert run(Fleet, case).digest() == pure_run(case)


@compiled_only
@settings(max_examples=60, deadline=None, derandomize=True)
@given(fleets())
def test_the_builds_agree_on_random_fleets(
    case: tuple[Workload, EngineConfig, FleetConfig],
) -> None:
    assert run(Fleet, case).digest() == pure_run(case)


@compiled_only
def test_a_build_from_another_source_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    native = sys.modules[NATIVE_NAME]
    assert engine._compiled_twin(Path(engine.__file__)) is native
    monkeypatch.setattr(native, "SOURCE_SHA256", "0" * 64)  # as if engine.py had been edited
    with pytest.warns(UserWarning, match="built from another version"):
        assert engine._compiled_twin(Path(engine.__file__)) is None


def test_pure_python_can_be_asked_for() -> None:
    probe = "import planner.simulate.engine as e; print(e.IMPLEMENTATION, e.Replica.__module__)"
    env = {**os.environ, "PLANNER_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["pure", "Python", "planner.simulate.engine"]
