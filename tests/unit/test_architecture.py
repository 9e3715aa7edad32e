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
    # the contracts are not vacuous: the latency model reaching into the store, and a cycle
    # inside a package, both break a contract that names the offending import
    for package in ("planner", "pricing", "app"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    operators = tmp_path / "planner" / "latency" / "operators.py"
    operators.write_text(operators.read_text() + "\nimport planner.store.models  # noqa\n")
    catalog = tmp_path / "planner" / "latency" / "catalog.py"
    catalog.write_text(catalog.read_text() + "import planner.latency.model  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "planner.latency.operators -> planner.store.models" in result.stdout
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


# The shells that may open the store themselves: the CLI's (named by --db), the dashboard's shared
# one, and ``planner db``, whose commands are about the store itself. Every other command and page
# reaches the store through a use case.
STORE_OPENERS = ("planner/cli/context.py", "planner/cli/db.py", "app/common.py")
STORE_MODULES = ("planner.store", "sqlalchemy")


def _store_imports(path: Path) -> list[str]:
    """The run-time imports (at the top or inside a function; not under ``if TYPE_CHECKING:``)
    of the store or SQLAlchemy in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for branch in node.orelse:
                visit(branch)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [f"{node.lineno} {alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.lineno} {node.module}"]
        for name in names:
            module = name.split()[1]
            if module in STORE_MODULES or module.startswith(tuple(m + "." for m in STORE_MODULES)):
                found.append(f"{path.relative_to(ROOT)}:{name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_shells_reach_the_store_through_use_cases() -> None:
    shells = sorted((ROOT / "planner" / "cli").glob("*.py")) + sorted((ROOT / "app").rglob("*.py"))
    direct = [
        found
        for path in shells
        if str(path.relative_to(ROOT)) not in STORE_OPENERS
        for found in _store_imports(path)
    ]
    assert not direct, "a shell imports the store (call a use case instead):\n" + "\n".join(direct)
    # the check sees an import: the store openers do import it
    assert _store_imports(ROOT / "planner" / "cli" / "db.py")
