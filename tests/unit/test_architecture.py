"""The layers hold: the import contracts in pyproject.toml (``[tool.importlinter]``, drawn in
docs/architecture.md) are kept, and the shells stay thin."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# A screen: a command or page function longer than this parses, works and renders at once.
MAX_SHELL_FUNCTION_LINES = 80


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )


def test_import_contracts_are_kept() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert f"Contracts: {len(contracts['contracts'])} kept, 0 broken." in result.stdout


def test_a_forbidden_import_is_named(tmp_path: Path) -> None:
    # the contracts are not vacuous: the latency model reaching into the store, a page reading
    # the store itself (inside a function) and a cycle inside a package each break a contract
    # that names the offending import
    for package in ("planner", "pricing", "app"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    operators = tmp_path / "planner" / "latency" / "operators.py"
    operators.write_text(operators.read_text() + "\nimport planner.store.models  # noqa\n")
    catalog = tmp_path / "planner" / "latency" / "catalog.py"
    catalog.write_text(catalog.read_text() + "import planner.latency.model  # noqa\n")
    page = tmp_path / "app" / "views" / "prices.py"
    page.write_text(
        page.read_text() + "\n\ndef _rows():\n    import planner.store.queries  # noqa\n"
    )
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "planner.latency.operators -> planner.store.models" in result.stdout
    assert "app.views.prices -> planner.store.queries" in result.stdout
    assert "No cycles are allowed in planner.latency" in result.stdout


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if ast.get_docstring(node) is not None:
                body = body[1:] or body
            lines = (node.end_lineno or node.lineno) - body[0].lineno + 1
            if lines > MAX_SHELL_FUNCTION_LINES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_shell_functions_fit_a_screen() -> None:
    shells = sorted((ROOT / "planner" / "cli").glob("*.py")) + sorted((ROOT / "app").rglob("*.py"))
    assert len(shells) > 20
    long = [found for path in shells for found in _long_functions(path)]
    assert not long, "longer than a screen (parse, call a use case, render):\n" + "\n".join(long)
