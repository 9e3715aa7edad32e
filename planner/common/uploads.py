"""Files that arrive as a name and bytes (the dashboard's uploads), read by the same code that
reads a file on disk.

The bytes are written to a private temporary folder under the uploaded file's own name, so a
format is detected from its suffix as for a file on disk; messages name the uploaded file,
never the temporary path, and the copy is gone afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import BinaryIO

from planner.common.text import shown
from planner.errors import InputFileError, PlannerError, UsageError

MAX_FILE_NAME_CHARS = 200


def upload_file_name(name: str) -> str:
    """The file name part of what a browser sent (some send a whole Windows or POSIX path),
    safe to create in a folder: no separators, no control characters, not ``.`` or ``..``."""
    base = PureWindowsPath(PurePosixPath(name).name).name.strip()
    if not base or base in (".", "..") or not base.isprintable() or "\x00" in base:
        raise UsageError(
            f"uploaded file name {shown(name)}: expected a plain file name such as requests.csv"
        )
    if len(base) > MAX_FILE_NAME_CHARS:
        raise UsageError(
            f"uploaded file name {shown(name)}: at most {MAX_FILE_NAME_CHARS} characters"
        )
    return base


def _renamed(exc: PlannerError, temporary: str, name: str) -> PlannerError:
    """``exc`` with the temporary path in its message replaced by the uploaded file's name."""
    message = str(exc).replace(temporary, name)
    try:
        return type(exc)(message)
    except TypeError:  # a subclass built from other arguments: keep the message, not the type
        return PlannerError(message)


@contextmanager
def uploaded_file(name: str, data: bytes | BinaryIO) -> Iterator[Path]:
    """The upload ``name`` with content ``data`` (bytes, or a binary file read from its current
    position) as a file on disk for the body of the ``with``; planner errors raised there name
    the uploaded file instead of that path."""
    file_name = upload_file_name(name)
    with tempfile.TemporaryDirectory(prefix="planner-upload-") as folder:
        path = Path(folder) / file_name
        with path.open("wb") as out:
            if isinstance(data, bytes | bytearray | memoryview):
                out.write(data)
            else:
                shutil.copyfileobj(data, out, 1 << 20)
        try:
            yield path
        except InputFileError as exc:
            raise InputFileError(file_name, exc.problem) from None
        except PlannerError as exc:
            if str(path) not in str(exc):
                raise
            raise _renamed(exc, str(path), file_name) from None
