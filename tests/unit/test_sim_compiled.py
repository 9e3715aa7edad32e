"""The compiled replica loop and step formula (mypyc, built by setup.py) against their
pure-Python sources.

Both builds come from ``planner/simulate/engine.py`` and ``planner/latency/step.py``; the compiled
ones must give the same results bit for bit, and must never run when built from another version
of the source.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings

import planner.latency.step as step
import planner.simulate.engine as engine
from planner.simulate.engine import EngineConfig
from planner.simulate.fleet import Fleet, FleetConfig
from planner.simulate.workload import Workload
from tests.pure_engine import NATIVE_NAME, use_pure_engine
from tests.unit.test_sim_engine import rough_model
from tests.unit.test_sim_scaling import fleets, run, scenarios

STEP_NATIVE_NAME = "planner.latency._step_native"

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
def test_the_compiled_step_formula_is_in_use() -> None:
    # the compiled engine calls the compiled step formula; so does the latency model
    assert step.IMPLEMENTATION == "compiled"
    assert step.StepFormula.__module__ == STEP_NATIVE_NAME
    assert vars(sys.modules[NATIVE_NAME])["StepFormula"] is step.StepFormula


def pure_step() -> ModuleType:
    """``step.py`` imported as pure Python under a name of its own (it never switches there)."""
    spec = importlib.util.spec_from_file_location("planner.latency._step_pure", step.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@compiled_only
@pytest.mark.parametrize(
    ("model", "precision", "tp"),
    [
        ("llama-3.1-8b", "fp8", 1),
        ("llama-3.1-8b", "bf16", 2),
        ("mixtral-8x7b", "bf16", 2),
        ("mixtral-8x7b", "fp8", 4),
        ("llama-2-70b", "int4-awq", 8),
    ],
)
def test_the_builds_agree_on_the_step_formula_bit_for_bit(
    model: str, precision: str, tp: int
) -> None:
    compiled = rough_model(model, precision, tp).step
    pure = pure_step().StepFormula(**compiled.constants())
    assert type(pure).__module__ == "planner.latency._step_pure"
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 9000, size=500).astype(np.float64)
    tokens[:30] = rng.integers(1, 4, size=30)  # tiny iterations: a MoE touches few experts
    pairs = tokens * rng.uniform(1, 3000, size=500)
    kv = rng.integers(0, 500_000, size=500).astype(np.float64)
    logits = np.minimum(tokens, rng.integers(0, 300, size=500)).astype(np.float64)
    logits[::7] = 0
    for t, p, k, n in zip(
        tokens.tolist(), pairs.tolist(), kv.tolist(), logits.tolist(), strict=True
    ):
        assert compiled.seconds(t, p, k, n) == pure.seconds(t, p, k, n)
    # ints, as the latency model's callers may pass them
    assert compiled.seconds(3, 6, 0, 1) == pure.seconds(3, 6, 0, 1)
    assert compiled.seconds(0, 0, 0, 0) == pure.seconds(0, 0, 0, 0) == 0.0


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


@compiled_only
def test_a_step_formula_built_from_another_source_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    native = sys.modules[STEP_NATIVE_NAME]
    assert step._compiled_twin(Path(step.__file__)) is native
    monkeypatch.setattr(native, "SOURCE_SHA256", "0" * 64)  # as if step.py had been edited
    with pytest.warns(UserWarning, match="built from another version"):
        assert step._compiled_twin(Path(step.__file__)) is None


@compiled_only
def test_the_compiled_engine_stands_down_without_the_compiled_step_formula(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an edited step.py runs as pure Python; the compiled engine, which calls the old build of
    # it natively, must not run either
    monkeypatch.setattr(step, "IMPLEMENTATION", "pure Python")
    with pytest.warns(UserWarning, match="step formula is not in use"):
        assert engine._compiled_twin(Path(engine.__file__)) is None


def test_pure_python_can_be_asked_for() -> None:
    probe = "import planner.simulate.engine as e; print(e.IMPLEMENTATION, e.Replica.__module__)"
    env = {**os.environ, "PLANNER_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["pure", "Python", "planner.simulate.engine"]


def test_a_pure_python_step_formula_can_be_asked_for() -> None:
    probe = "import planner.latency.step as s; print(s.IMPLEMENTATION, s.StepFormula.__module__)"
    env = {**os.environ, "PLANNER_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["pure", "Python", "planner.latency.step"]
