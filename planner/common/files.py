"""Output files: checked before the work starts, written whole or not at all.

A regular file is written to a temporary file created exclusively beside it (``O_EXCL``, never
through a link) and renamed over it, so a failure (disk full, interruption) never leaves half a
file. A destination that is a symbolic link is refused, before the work and again just before
the rename: planner never writes through a link (``--out link.csv`` pointing at a system file
would replace that file). A device or a pipe (``/dev/null``, a FIFO, ``/dev/stdout``), and
anything under /dev or /proc but /dev/shm, is written in place: renaming over ``/dev/stdout``
would replace the link itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from planner.errors import UsageError


def _under_system_folder(path: Path) -> bool:
    """Under /dev or /proc (devices, /dev/stdout, /proc/self/fd/N), but not /dev/shm, a folder
    anyone may create files and links in."""
    parts = Path(os.path.normpath(path.absolute())).parts[1:3]
    return parts[:1] in (("dev",), ("proc",)) and parts != ("dev", "shm")


def writes_in_place(path: Path) -> bool:
    """A device or a pipe, or anything under /dev (but /dev/shm) or /proc: written in place,
    not replaced. A link elsewhere is not (it is refused)."""
    if _under_system_folder(path):
        return True
    if path.is_symlink():
        return False
    return path.exists() and not path.is_file() and not path.is_dir()


def link_message(path: Path, option: str) -> str:
    """What planner says when asked to write to a symbolic link."""
    return (
        f"{option} {path}: is a symbolic link; planner does not write through links "
        "(give the real path or remove the link)"
    )


def refuse_link(path: Path, option: str) -> None:
    """Raise :class:`UsageError` when ``path`` itself is a symbolic link (followed or not, even
    one that points nowhere), unless it is written in place (/dev/stdout)."""
    if path.is_symlink() and not _under_system_folder(path):
        raise UsageError(link_message(path, option))


def check_output_path(path: Path, option: str) -> Path:
    """Fail fast, before any work, when ``path`` cannot be written: its folder is missing or not
    writable, it names a folder or a symbolic link, or a device that is not there. Returns the
    path unchanged.
    """
    refuse_link(path, option)
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if writes_in_place(path):
        if not path.exists():
            raise UsageError(f"{option} {path}: cannot write there (no such device)")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: not writable")
        return path
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {folder} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file exists and is not writable")
    # Some file systems pass os.access yet refuse new files: try one.
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", delete=True):
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None
    return path


@contextlib.contextmanager
def atomic_output(path: Path, option: str = "output") -> Iterator[Path]:
    """A temporary path to write the output to; when the block succeeds it becomes ``path``
    (renamed over a regular file, copied into a device or pipe), else it is removed.
    """
    refuse_link(path, option)
    in_place = writes_in_place(path)
    folder = None if in_place else path.parent
    # mkstemp opens with O_CREAT | O_EXCL: a new file, never an existing one or a link's target
    try:
        fd, temp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".part")
        created = os.fstat(fd)
    except OSError as exc:
        raise UsageError(f"{option} {path}: could not write ({exc.strerror or exc})") from exc
    temp = Path(temp_name)
    try:
        yield temp
        if in_place:
            _copy_in_place(temp, path)
        else:
            _check_still_ours(temp, created, path, option)
            os.fchmod(fd, _mode_for(path))
            refuse_link(path, option)  # again: the destination may have become a link meanwhile
            temp.replace(path)  # rename(2) replaces a link itself, never what it points to
    except OSError as exc:
        raise UsageError(f"{option} {path}: could not write ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
        temp.unlink(missing_ok=True)  # unlink never follows a link: whatever is there goes


def write_text_atomic(path: Path, text: str, option: str = "output") -> None:
    with atomic_output(path, option) as temp:
        temp.write_text(text, encoding="utf-8")


def _check_still_ours(temp: Path, created: os.stat_result, path: Path, option: str) -> None:
    """The temporary path is still the file mkstemp made (not a link or another file put in its
    place), looked at without following links."""
    try:
        now = os.lstat(temp)
    except FileNotFoundError:
        now = None
    if now is None or not stat.S_ISREG(now.st_mode) or _identity(now) != _identity(created):
        raise UsageError(
            f"{option} {path}: the temporary file {temp.name} was replaced while planner wrote "
            "it; nothing written"
        )


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _mode_for(target: Path) -> int:
    """An existing file keeps its mode; a new one gets what the umask allows (mkstemp's 0600
    would make every output private). Looked at without following links."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return info.st_mode & 0o7777
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
