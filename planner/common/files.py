"""Output files: checked before the work starts, written whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from planner.errors import UsageError


def check_output_path(path: Path, option: str) -> Path:
    """Fail fast, before any work, when ``path`` cannot be written: its folder is missing or not
    writable, or it names a folder. Returns the path unchanged.
    """
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file exists and is not writable")
    # /proc, /sys and friends pass os.access yet refuse new files: try one.
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", delete=True):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


@contextlib.contextmanager
def atomic_output(path: Path, option: str = "output") -> Iterator[Path]:
    """A temporary path beside ``path``; renamed over it only when the block succeeds, so a
    failure (disk full, interruption) never leaves a half-written file.
    """
    folder = path.parent if str(path.parent) else Path()
    fd, temp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    temp = Path(temp_name)
    try:
        yield temp
        temp.replace(path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: could not write ({exc.strerror or exc})") from exc
    finally:
        temp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str, option: str = "output") -> None:
    with atomic_output(path, option) as temp:
        temp.write_text(text, encoding="utf-8")
