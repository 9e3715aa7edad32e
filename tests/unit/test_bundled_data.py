"""Everything the product, the tests and the demo read lies in this repository.

A user's clone has nothing beside it: no code may reach outside the project for data, and the
bundled traces must be the published files they claim to be.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from tests.conftest import AZURE_CODE, MOONCAKE, ROOT, SERVEGEN, TRACES

CODE_FOLDERS = ("planner", "pricing", "app", "tests", "benchmarks", "data", ".ci")
CODE_SUFFIXES = {".py", ".sh", ".toml", ".cfg", ".ini", ".yaml", ".yml"}
# A path into the folder beside the project: "../shared", or "shared" joined onto a parent.
OUTSIDE = re.compile(r"""\.\./shared|parent\s*/\s*["']shared["']|["']\.\.["']\s*,\s*["']shared""")


def code_files() -> list[Path]:
    files = [ROOT / "Makefile", ROOT / "pyproject.toml"]
    for folder in CODE_FOLDERS:
        files += [
            p for p in (ROOT / folder).rglob("*") if p.suffix in CODE_SUFFIXES or p.name == "run"
        ]
    return [p for p in files if p.is_file() and ".venv" not in p.parts]


def test_no_code_reads_from_beside_the_project() -> None:
    this = Path(__file__).resolve()
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in code_files()
        if path.resolve() != this
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []


def test_the_guard_would_catch_a_path_beside_the_project() -> None:
    assert OUTSIDE.search("TRACES = ROOT.parent /" + ' "shared" / "data"')
    assert OUTSIDE.search("cat " + "../" + "shared/data/traces/x.csv")
    assert not OUTSIDE.search("tenancy shared")


def published_sha256(readme: Path) -> dict[str, str]:
    return {
        name: digest
        for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme.read_text(), re.M)
    }


@pytest.mark.parametrize("path", [AZURE_CODE, MOONCAKE])
def test_bundled_traces_are_the_published_files(path: Path) -> None:
    expected = published_sha256(TRACES / "README.md")
    original = path.name.removesuffix(".gz")
    assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == expected[original]


def test_bundled_samples_are_the_published_files() -> None:
    expected = published_sha256(ROOT / "data" / "samples" / "README.md")
    assert hashlib.sha256(SERVEGEN.read_bytes()).hexdigest() == expected[SERVEGEN.name]
    conv = ROOT / "data" / "samples" / "azure_llm_conv_2023.csv.gz"
    digest = hashlib.sha256(gzip.decompress(conv.read_bytes())).hexdigest()
    assert digest == expected["azure_llm_conv_2023.csv"]


@pytest.mark.parametrize("folder", ["tests/fixtures/traces", "data/samples"])
def test_every_bundled_trace_has_its_licence(folder: str) -> None:
    readme = (ROOT / folder / "README.md").read_text()
    for licence in re.findall(r"`(LICENSE_[^`]+\.txt)`", readme):
        assert (ROOT / folder / licence).is_file(), licence
