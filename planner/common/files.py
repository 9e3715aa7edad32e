"""Output files: checked before the work starts, written whole or not at all.

A regular file is written to a temporary file beside it and renamed over it, so a failure (disk
full, interruption) never leaves half a file; a link is followed (the file it points to is
replaced, never the link). A device or a pipe (``/dev/null``, a FIFO, ``/dev/stdout``) is written
in place: renaming over ``/dev/stdout`` would replace the link itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from planner.errors import UsageError


def writes_in_place(path: Path) -> bool:
    """A device or a pipe, or anything under /dev or /proc: written in place, not replaced."""
    absolute = Path(os.path.normpath(path.absolute()))
    if absolute.parts[1:2] in (("dev",), ("proc",)):
        return True
    return path.exists() and not path.is_file() and not path.is_dir()


def _target(path: Path) -> Path:
    """The file a link points to (the path itself when it is no link)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def check_output_path(path: Path, option: str) -> Path:
    """Fail fast, before any work, when ``path`` cannot be written: its folder is missing or not
    writable, it names a folder, or a device that is not there. Returns the path unchanged.
    """
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if writes_in_place(path):
        if not path.exists():
            raise UsageError(f"{option} {path}: cannot write there (no such device)")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: not writable")
        return path
    target = _target(path)
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {folder} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {path}: the file exists and is not writable")
    # Some file systems pass os.access yet refuse new files: try one.
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{target.name}.", delete=True):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


@contextlib.contextmanager
def atomic_output(path: Path, option: str = "output") -> Iterator[Path]:
    """A temporary path to write the output to; when the block succeeds it becomes ``path``
    (renamed over a regular file, copied into a device or pipe), else it is removed.
    """
    in_place = writes_in_place(path)
    target = _target(path)
    folder = None if in_place else target.parent
    fd, temp_name = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    temp = Path(temp_name)
    try:
        yield temp
        if in_place:
            _copy_in_place(temp, path)
        else:
            temp.chmod(_mode_for(target))
            temp.replace(target)
    except OSError as exc:
        raise UsageError(f"{option} {path}: could not write ({exc.strerror or exc})") from exc
    finally:
        temp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str, option: str = "output") -> None:
    with atomic_output(path, option) as temp:
        temp.write_text(text, encoding="utf-8")


def _mode_for(target: Path) -> int:
    """An existing file keeps its mode; a new one gets what the umask allows (mkstemp's 0600
    would make every output private)."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _copy_in_place(source: Path, path: Path) -> None:
    target = path.stat()
    for stream in (sys.stdout, sys.stderr):
        # /dev/stdout is this process's own output: written through it, in order with the rest
        # (opening it anew would write at another offset of a redirected file)
        try:
            mine = os.fstat(stream.fileno())
        except (OSError, ValueError, AttributeError):
            continue
        if (mine.st_dev, mine.st_ino) == (target.st_dev, target.st_ino):
            stream.flush()
            with source.open("rb") as data:
                shutil.copyfileobj(data, stream.buffer)
            stream.buffer.flush()
            return
    with source.open("rb") as data, path.open("ab") as out:  # a device, a pipe: no truncation
        shutil.copyfileobj(data, out)
