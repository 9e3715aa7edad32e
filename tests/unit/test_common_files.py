"""Output files: checked up front, written whole, links refused, devices written in place."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from planner.common.files import (
    atomic_output,
    check_output_path,
    write_text_atomic,
    writes_in_place,
)
from planner.errors import UsageError


@pytest.mark.parametrize(
    ("name", "message"),
    [("missing/out.csv", "does not exist"), (".", "is a folder"), ("/proc/x.csv", "cannot write")],
)
def test_unwritable_paths_are_refused_before_the_work(
    tmp_path: Path, name: str, message: str
) -> None:
    path = Path(name) if name.startswith("/") else tmp_path / name
    with pytest.raises(UsageError, match=message):
        check_output_path(path, "--out")


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_output(out, "--out") as temp:
        temp.write_text("half")
        raise RuntimeError("disk full")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_is_refused_and_its_target_left_as_it_was(tmp_path: Path, dangling: bool) -> None:
    real = tmp_path / "real.json"
    if not dangling:
        real.write_bytes(b"{}\x00kept")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    for attempt in (
        lambda: check_output_path(link, "--out"),
        lambda: write_text_atomic(link, "new", "--out"),
    ):
        with pytest.raises(UsageError) as caught:
            attempt()
        message = str(caught.value)
        assert message.startswith(f"--out {link}: is a symbolic link")
        assert "does not write through links" in message
    assert link.is_symlink()
    assert real.exists() is not dangling
    if not dangling:
        assert real.read_bytes() == b"{}\x00kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["link.json"] + ([] if dangling else ["real.json"])
    )


def test_a_destination_that_becomes_a_link_while_writing_is_refused(tmp_path: Path) -> None:
    # checked again just before the rename: a link made meanwhile is neither followed nor
    # replaced, and no temporary file is left
    real = tmp_path / "real.csv"
    real.write_text("kept\n")
    out = tmp_path / "out.csv"
    with pytest.raises(UsageError, match="is a symbolic link"), atomic_output(out, "--out") as temp:
        temp.write_text("new\n")
        out.symlink_to(real)
    assert out.is_symlink() and real.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "real.csv"]


def test_a_temporary_file_replaced_by_a_link_is_not_renamed_into_place(tmp_path: Path) -> None:
    real = tmp_path / "real.csv"
    real.write_text("kept\n")
    out = tmp_path / "out.csv"
    with pytest.raises(UsageError, match="was replaced"), atomic_output(out, "--out") as temp:
        temp.unlink()
        temp.symlink_to(real)
    assert real.read_text() == "kept\n" and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.csv"]


def test_the_temporary_file_is_new_and_private_until_renamed(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    with atomic_output(out, "--out") as temp:
        assert temp.parent == tmp_path and temp.name.startswith(".out.csv.")
        assert not temp.is_symlink() and temp.stat().st_size == 0
        assert temp.stat().st_mode & 0o077 == 0
        temp.write_text("x")
    assert out.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_a_link_in_a_system_folder_is_written_in_place() -> None:
    # /dev/stdout is a link (to /proc/self/fd/1): written through, as before
    assert Path("/dev/stdout").is_symlink()
    assert check_output_path(Path("/dev/stdout"), "--out") == Path("/dev/stdout")
    assert not writes_in_place(Path("/dev/shm/out.csv"))


def test_new_files_follow_the_umask_and_old_ones_keep_their_mode(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.csv"
        write_text_atomic(fresh, "x", "--out")
        assert fresh.stat().st_mode & 0o777 == 0o644
        kept = tmp_path / "kept.csv"
        kept.write_text("y")
        kept.chmod(0o640)
        write_text_atomic(kept, "z", "--out")
        assert kept.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old_umask)


def test_devices_and_pipes_are_written_in_place(tmp_path: Path) -> None:
    check_output_path(Path("/dev/null"), "--out")
    write_text_atomic(Path("/dev/null"), "gone", "--out")
    assert Path("/dev/null").is_char_device()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_text_atomic(fifo, "through the pipe", "--out")
    reader.join(timeout=10)
    assert received == [b"through the pipe"]
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_what_is_written_in_place() -> None:
    assert writes_in_place(Path("/dev/stdout")) and writes_in_place(Path("/dev/null"))
    assert writes_in_place(Path("/proc/x")) and not writes_in_place(Path("out.csv"))


def test_dev_stdout_redirected_to_a_file_gets_the_output_in_order(tmp_path: Path) -> None:
    # `planner ... --out /dev/stdout > result.txt`: written through the process's own stdout,
    # after what it printed before, and /dev/stdout stays a link
    script = (
        "from pathlib import Path; from planner.common.files import write_text_atomic; "
        "print('before', flush=True); write_text_atomic(Path('/dev/stdout'), 'written\\n')"
    )
    result = tmp_path / "result.txt"
    with result.open("w") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, check=True, timeout=60)
    assert result.read_text() == "before\nwritten\n"
    assert Path("/dev/stdout").is_symlink()
