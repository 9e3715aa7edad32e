"""A real spreadsheet engine for the workbook's tests: LibreOffice (headless) recalculates every
formula and saves the values, or prints the workbook to PDF; poppler's pdftoppm turns PDF pages
into PNGs.

Each conversion runs with its own LibreOffice profile in a temporary folder (parallel runs and a
user's own LibreOffice never share one), told to recalculate formulas whenever it loads a file.
Missing tools skip the test with the reason, unless ``PLANNER_REQUIRE_OFFICE=1`` (CI), where
they fail it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

# Recalculate on load, always (0), for Excel and ODF files: the workbook carries formulas only.
RECALCULATE_ON_LOAD = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry"
           xmlns:xs="http://www.w3.org/2001/XMLSchema"
           xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Calc/Formula/Load">
  <prop oor:name="OOXMLRecalcMode" oor:op="fuse"><value>0</value></prop>
</item>
<item oor:path="/org.openoffice.Office.Calc/Formula/Load">
  <prop oor:name="ODFRecalcMode" oor:op="fuse"><value>0</value></prop>
</item>
</oor:items>
"""
CONVERT_TIMEOUT_S = 240
PACKAGES = {"soffice": "libreoffice-calc", "pdftoppm": "poppler-utils"}


def required_tool(name: str) -> str:
    """The tool's path; skips the test when it is missing (fails it under
    ``PLANNER_REQUIRE_OFFICE=1``)."""
    found = shutil.which(name)
    if found is None:
        package = PACKAGES.get(name, name)
        reason = f"{name} is not installed (Debian package {package})"
        if os.environ.get("PLANNER_REQUIRE_OFFICE") == "1":
            pytest.fail(f"{reason}, and PLANNER_REQUIRE_OFFICE=1")
        pytest.skip(reason)
    return found


def convert(sources: list[Path], target: str, out_dir: Path) -> list[Path]:
    """``sources`` converted by LibreOffice to ``target`` (e.g. "xlsx", "pdf") in ``out_dir``
    (one process for all of them: LibreOffice takes seconds to start)."""
    soffice = required_tool("soffice")
    profile = out_dir / "libreoffice-profile"
    (profile / "user").mkdir(parents=True, exist_ok=True)
    (profile / "user" / "registrymodifications.xcu").write_text(RECALCULATE_ON_LOAD)
    command = [
        soffice,
        f"-env:UserInstallation={profile.resolve().as_uri()}",
        "--headless",
        "--norestore",
        "--convert-to",
        target,
        "--outdir",
        str(out_dir),
        *(str(source) for source in sources),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=CONVERT_TIMEOUT_S, check=False
    )
    results = [out_dir / f"{source.stem}.{target.split(':')[0]}" for source in sources]
    missing = [str(path) for path in results if not path.is_file()]
    assert not missing, (
        f"LibreOffice did not write {missing} (exit {done.returncode}): "
        f"{done.stdout[-2000:]} {done.stderr[-2000:]}"
    )
    return results


def recalculated(sources: list[Path], out_dir: Path) -> list[Path]:
    """Each workbook opened, recalculated and saved again as .xlsx by LibreOffice (cached values
    then readable with ``openpyxl.load_workbook(path, data_only=True)``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return convert(sources, "xlsx", out_dir)


def pdf_pages(pdf: Path, prefix: Path, dpi: int = 80) -> list[Path]:
    """Every page of ``pdf`` as a PNG, in page order."""
    pdftoppm = required_tool("pdftoppm")
    subprocess.run(
        [pdftoppm, "-png", "-r", str(dpi), str(pdf), str(prefix)],
        check=True,
        capture_output=True,
        timeout=CONVERT_TIMEOUT_S,
    )
    return sorted(prefix.parent.glob(f"{prefix.name}-*.png"))
