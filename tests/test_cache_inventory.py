"""One inventory of the model cache: `spectui models`, `models verify`, `models rm` and `doctor`
see the GGUFs the ggml backend keeps (they saw converted stores only), only the default target
is "(default)", and a byte flipped between the sampled blocks of a kept GGUF is found by
`models verify` and by the start after a crash while loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spectui.cli.app import app
from spectui.models import gguf_local, integrity
from spectui.models.registry import DEFAULT_DRAFT, DEFAULT_TARGET, MODELS, cache_dir, gguf_dir, resolve

runner = CliRunner()
FLIPPED_AT = 10_000  # past the first 4 KiB sample, before the next one at 128 KiB


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SPECTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr("spectui.engines.vllm.build.cuda_present", lambda: False)


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory) -> bytes:
    from tiny_gguf import write_tiny_gguf

    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()


def keep_gguf(alias: str, data: bytes, monkeypatch) -> Path:
    """The GGUF of `alias` as the ggml backend keeps it after a fetch: the file and its record,
    sampled as a large file is (the tiny file stands in for a gigabyte)."""
    monkeypatch.setattr(integrity, "SMALL_FILE_BYTES", 0)
    folder = gguf_dir(alias)
    folder.mkdir(parents=True)
    path = folder / f"{alias}.gguf"
    path.write_bytes(data)
    gguf_local._write_record(folder, path, MODELS[alias].index.sha256)
    return path


def flip_between_samples(path: Path, unseen: bool = True) -> None:
    """unseen: as the disk's own damage would be, with the file's stamp as recorded (a write
    through the filesystem changes it, and the load check then hashes the file whole)."""
    with open(path, "r+b") as handle:
        handle.seek(FLIPPED_AT)
        byte = handle.read(1)
        handle.seek(FLIPPED_AT)
        handle.write(bytes([byte[0] ^ 0xFF]))
    if unseen:
        record_path = path.parent / gguf_local.RECORD_FILE
        record = json.loads(record_path.read_text())
        record["file"]["stamp"] = integrity.stamp_of(path)
        record_path.write_text(json.dumps(record))


def test_the_list_shows_a_kept_gguf_cached_with_its_size_and_one_default(tiny_bytes, monkeypatch):
    keep_gguf(DEFAULT_TARGET, tiny_bytes, monkeypatch)
    rows = {row["alias"]: row for row in json.loads(runner.invoke(app, ["models", "list", "--json"]).stdout)}
    assert rows[DEFAULT_TARGET]["cached"] is True and rows[DEFAULT_TARGET]["size_bytes"] >= len(tiny_bytes)
    assert rows[DEFAULT_DRAFT]["cached"] is False

    table = runner.invoke(app, ["models", "list"]).stdout
    [line] = [line for line in table.splitlines() if f"{DEFAULT_TARGET} " in line]
    assert "(default)" in line and " yes " in line and "MB" in line
    assert table.count("(default)") == 1 and "(default draft)" not in table  # a CPU chat runs no draft model
    monkeypatch.setattr("spectui.engines.vllm.build.cuda_present", lambda: True)
    table = runner.invoke(app, ["models", "list"]).stdout
    assert f"{DEFAULT_DRAFT} (default draft)" in table and table.count("(default)") == 1


def test_verify_finds_a_byte_flipped_between_the_sampled_blocks_of_a_kept_gguf(tiny_bytes, monkeypatch):
    path = keep_gguf(DEFAULT_TARGET, tiny_bytes, monkeypatch)
    flip_between_samples(path)
    record = json.loads((path.parent / gguf_local.RECORD_FILE).read_text())["file"]
    assert integrity.quick_problem(path.parent, {path.name: record}) is None  # the sample misses it
    fetched = []
    monkeypatch.setattr(gguf_local, "local_gguf", lambda model, progress=None: fetched.append(model.name))

    result = runner.invoke(app, ["models", "verify"])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0 and "holds no models" not in said
    assert f"{DEFAULT_TARGET} GGUF: {path.name} does not match its checksum: fetching it" in said
    assert fetched == [DEFAULT_TARGET]


def test_a_byte_flipped_by_a_write_between_the_samples_is_refetched_at_the_next_start(tiny_bytes, monkeypatch):
    """Issue 59 item 8: it loaded silently; the write changed the file's stamp."""
    path = keep_gguf(DEFAULT_TARGET, tiny_bytes, monkeypatch)
    flip_between_samples(path, unseen=False)
    fetched = []

    def fetch_again(spec, folder, progress=None):
        fetched.append(spec.alias)
        path.write_bytes(tiny_bytes)
        return path

    monkeypatch.setattr("spectui.models.fetch.fetch_gguf", fetch_again)
    assert gguf_local.local_gguf(resolve(DEFAULT_TARGET)) == path
    assert fetched == [DEFAULT_TARGET] and path.read_bytes() == tiny_bytes
    assert gguf_local.local_gguf(resolve(DEFAULT_TARGET)) == path and fetched == [DEFAULT_TARGET]
    os.utime(path, ns=(1, 1))  # touched, the bytes the same: hashed whole once, the new stamp kept
    assert gguf_local.local_gguf(resolve(DEFAULT_TARGET)) == path and fetched == [DEFAULT_TARGET]
    record = json.loads((path.parent / gguf_local.RECORD_FILE).read_text())["file"]
    assert record["stamp"] == integrity.stamp_of(path)


def test_a_crash_while_loading_makes_the_next_start_hash_every_byte(tiny_bytes, monkeypatch):
    path = keep_gguf(DEFAULT_TARGET, tiny_bytes, monkeypatch)
    model = resolve(DEFAULT_TARGET)
    with gguf_local.loading_marker(model):  # a load that ends leaves nothing behind
        assert list(path.parent.glob("loading-*"))
    assert not list(path.parent.glob("loading-*"))
    flip_between_samples(path)
    assert gguf_local.local_gguf(model) == path  # the quick check misses it, as measured

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (path.parent / f"loading-{gone.stdout.strip()}").touch()  # a process that died while loading
    fetched = []

    def fetch_again(spec, folder, progress=None):
        fetched.append(spec.alias)
        path.write_bytes(tiny_bytes)
        return path

    monkeypatch.setattr("spectui.models.fetch.fetch_gguf", fetch_again)
    assert gguf_local.local_gguf(model) == path
    assert fetched == [DEFAULT_TARGET] and path.read_bytes() == tiny_bytes
    assert not list(path.parent.glob("loading-*"))  # hashed whole once: the next start samples again


def test_rm_removes_a_kept_gguf_and_the_tokenizer_read_out_of_it(tiny_bytes, monkeypatch):
    path = keep_gguf(DEFAULT_DRAFT, tiny_bytes, monkeypatch)
    tokenizer = cache_dir() / "tokenizers" / f"{path.stem}-{len(tiny_bytes)}"
    tokenizer.mkdir(parents=True)
    (tokenizer / "tokenizer.json").write_text("{}")
    result = runner.invoke(app, ["models", "rm", DEFAULT_DRAFT, "--yes"])
    assert result.exit_code == 0, result.output
    assert not path.parent.exists() and not tokenizer.exists()


def test_doctor_verifies_a_kept_gguf_and_fails_on_a_damaged_one(tiny_bytes, monkeypatch):
    from spectui.cli import doctor

    path = keep_gguf(DEFAULT_TARGET, tiny_bytes, monkeypatch)
    check = doctor.check_cache()
    assert f"{DEFAULT_TARGET} GGUF" in check.found and "(verified)" in check.found, check
    flip_between_samples(path)
    check = doctor.check_cache()
    assert check.status == "fail" and f"(DAMAGED: {path.name} does not match its checksum)" in check.found
    assert check.advice == f"spectui models verify {DEFAULT_TARGET} (rebuilds it)"
