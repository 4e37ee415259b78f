"""The one writer of files the user names (issue 48): regular files only, never a silent
overwrite, an atomic replace. `-o /dev/full` once turned a device node into a regular file."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from spectui.core.files import NotAFile, ReadOnlyFile, WouldOverwrite, check_user_file, write_user_file


def test_a_new_file_is_written_and_its_path_returned(tmp_path):
    written = write_user_file(tmp_path / "out.md", "héllo\n")
    assert written == tmp_path / "out.md"
    assert written.read_bytes() == "héllo\n".encode()
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]  # no temporary file left


def test_bytes_are_written_as_they_are(tmp_path):
    assert write_user_file(tmp_path / "raw", b"\x00\xff").read_bytes() == b"\x00\xff"


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()
    caught: list[BaseException] = []

    def write() -> None:
        try:
            write_user_file(fifo, "x", overwrite=True)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            caught.append(error)
        done.set()

    threading.Thread(target=write, daemon=True).start()
    # Opening a FIFO with no reader blocks: a writer that opened it would never set `done`.
    assert done.wait(10), "the writer opened the FIFO and blocked on it"
    assert len(caught) == 1 and isinstance(caught[0], NotAFile)
    assert "FIFO" in str(caught[0])
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_refused_and_stays_a_device():
    with pytest.raises(NotAFile) as caught:
        write_user_file("/dev/null", "x", overwrite=True)
    assert "a device" in str(caught.value)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(NotAFile):
        write_user_file(tmp_path, "x", overwrite=True)
    assert tmp_path.is_dir()


def test_a_link_to_a_file_writes_the_target_and_keeps_the_link(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with pytest.raises(WouldOverwrite):
        write_user_file(link, "new")
    assert write_user_file(link, "new", overwrite=True) == target
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"


def test_a_link_to_a_fifo_or_to_nothing_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-fifo").symlink_to(fifo)
    (tmp_path / "to-nothing").symlink_to(tmp_path / "missing")
    with pytest.raises(NotAFile):
        write_user_file(tmp_path / "to-fifo", "x", overwrite=True)
    with pytest.raises(NotAFile):
        write_user_file(tmp_path / "to-nothing", "x", overwrite=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not (tmp_path / "missing").exists()


def test_an_existing_file_is_kept_unless_overwrite_is_asked(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("mine")
    path.chmod(0o640)
    with pytest.raises(WouldOverwrite) as caught:
        write_user_file(path, "theirs")
    assert path.read_text() == "mine"
    assert isinstance(caught.value, FileExistsError)
    assert str(caught.value) == f"{path} already exists; not overwriting it"
    write_user_file(path, "theirs", overwrite=True)
    assert path.read_text() == "theirs"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the old file's mode is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]


@pytest.mark.parametrize("mode", [0o444, 0o400])
def test_a_read_only_file_is_not_replaced_even_when_overwrite_is_asked(tmp_path, mode):
    """--force replaced a file the user made read-only (the write goes by rename, which the
    folder allows): refused, by the bits too where os.access passes (root)."""
    path = tmp_path / "kept.md"
    path.write_text("mine")
    path.chmod(mode)
    for write in (lambda: write_user_file(path, "theirs", overwrite=True), lambda: check_user_file(path, overwrite=True)):
        with pytest.raises(ReadOnlyFile) as caught:
            write()
        assert str(caught.value) == f"{path} is read-only (mode {mode:04o}); not replacing it"
        assert caught.value.strerror == f"read-only, mode {mode:04o}" and isinstance(caught.value, PermissionError)
    assert path.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["kept.md"]
    with pytest.raises(WouldOverwrite):  # without overwrite, the refusal is as before
        write_user_file(path, "theirs")


def test_the_refusal_names_the_path_on_one_safe_line(tmp_path):
    path = tmp_path / "a\nb\x1b[2J"
    path.write_text("x")
    message = str(WouldOverwrite(path))
    assert "\n" not in message and "\x1b" not in message


def test_backup_keeps_the_old_content_and_replaces_an_older_backup(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text("first")
    write_user_file(path, "second", overwrite=True, backup=True)
    assert (path.read_text(), Path(f"{path}.bak").read_text()) == ("second", "first")
    write_user_file(path, "third", overwrite=True, backup=True)
    assert (path.read_text(), Path(f"{path}.bak").read_text()) == ("third", "second")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chat.json", "chat.json.bak"]


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "keep.md"
    path.write_text("old")

    def full_disk(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_user_file(path, "new", overwrite=True)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.md"]


# `spectui history export -o PATH` through the writer: PATH.partial renamed over PATH once
# turned /dev/full into a regular file and replaced an existing export without a word.


@pytest.fixture
def saved_id(tmp_path, monkeypatch) -> int:
    from test_history_files import save_conversation

    from spectui.store import Store

    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    store = Store(folder / "history.sqlite3")
    try:
        return save_conversation(store, "hi", "there")
    finally:
        store.close()


def export(*args: str):
    from test_history_files import history

    return history("export", *args)


def test_export_onto_a_fifo_is_refused_in_one_line(saved_id, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = export(str(saved_id), "-o", str(fifo), "--force")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"spectui: error: cannot write {fifo}: a FIFO, not a regular file"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_export_onto_a_device_is_refused_and_the_device_stays(saved_id):
    result = export(str(saved_id), "-o", "/dev/null", "--force")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["spectui: error: cannot write /dev/null: a device, not a regular file"]
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_export_onto_an_existing_file_needs_force(saved_id, tmp_path):
    out = tmp_path / "chat.md"
    out.write_text("my notes")
    refused = export(str(saved_id), "-o", str(out))
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        f"spectui: error: {out} exists: name a new file, or add --force to replace it"
    ]
    assert out.read_text() == "my notes"
    forced = export(str(saved_id), "-o", str(out), "--force")
    assert forced.exit_code == 0, forced.stderr
    assert "there" in out.read_text()


def test_export_onto_a_read_only_file_is_refused_even_with_force(saved_id, tmp_path):
    out = tmp_path / "chat.md"
    out.write_text("my notes")
    out.chmod(0o444)
    result = export(str(saved_id), "-o", str(out), "--force")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"spectui: error: cannot write {out}: read-only, mode 0444"]
    assert out.read_text() == "my notes"
