"""A disk that fills up during the first fetch is named as full (where, how much is needed and
free), not taken for a network problem."""

from __future__ import annotations

import builtins
import errno
import hashlib
import subprocess

import pytest

from spectui.core.errors import ModelError
from spectui.models import fetch as fetch_module
from spectui.models.registry import IndexPart, IndexWeights, ModelSpec

CHUNKS = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 30]


def test_a_disk_full_while_joining_the_parts_says_the_disk_is_full(tmp_path, monkeypatch):
    site = tmp_path / "site"
    parts = tuple(IndexPart(f"fake-part{n}", "1.0", f"fake_part{n}/part{n}.bin") for n in (1, 2))
    for part, chunk in zip(parts, CHUNKS):
        (site / part.member).parent.mkdir(parents=True)
        (site / part.member).write_bytes(chunk)
    whole = b"".join(CHUNKS)
    spec = ModelSpec("fake-model", "index", "test", "1M",
                     index=IndexWeights(parts, hashlib.sha256(whole).hexdigest(), len(whole), "fake.gguf"))
    monkeypatch.setattr(fetch_module, "_installed_file", lambda part: site / part.member)
    real_open = builtins.open

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def opened(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        return FullDisk(handle) if "w" in mode else handle

    monkeypatch.setattr(fetch_module, "open", opened, raising=False)
    out = tmp_path / "cache" / "gguf" / "fake-model"
    with pytest.raises(ModelError) as caught:
        fetch_module.fetch_gguf(spec, out, None)
    message = str(caught.value)
    assert "disk is full" in message and str(out) in message
    assert f"{len(whole) / 1e6:.1f} MB" in message and " free" in message
    assert "network" not in message and "\n" not in message
    assert not list(out.glob("*.partial"))


def test_pip_running_out_of_space_says_the_disk_is_full(tmp_path, monkeypatch):
    def full_disk_pip(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: Could not install packages due to an "
                                           "OSError: [Errno 28] No space left on device\n")

    monkeypatch.setattr(fetch_module.subprocess, "run", full_disk_pip)
    parts = [IndexPart("fake-part1", "1.0", "fake_part1/part1.bin")]
    with pytest.raises(ModelError) as caught:
        fetch_module.download_wheels(parts, tmp_path, fetch_module.no_progress)
    message = str(caught.value)
    assert "disk is full" in message and str(tmp_path) in message and " free" in message
    assert "check the network" not in message
