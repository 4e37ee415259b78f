"""A byte flipped between the sampled blocks of a large model file (issue 59 item 8): the quick
check at a later start loaded it silently. A write changes the file's stamp, and a changed
stamp makes the quick check hash that file whole; an unchanged file still costs a stat."""

from __future__ import annotations

import os

import spectui.models.integrity as integrity


def test_a_flip_between_the_samples_is_caught_by_the_stamp(tmp_path, monkeypatch):
    monkeypatch.setattr(integrity, "SMALL_FILE_BYTES", 1024)  # a 1 MB file counts as large here
    path = tmp_path / "model.gguf"
    path.write_bytes(bytes(range(256)) * 4096)
    records = integrity.record(tmp_path, ["model.gguf"])
    assert "sampled_sha256" in records["model.gguf"] and "stamp" in records["model.gguf"]
    assert integrity.quick_problem(tmp_path, records) is None
    hashed = []
    monkeypatch.setattr(integrity, "sha256_of", lambda *a, **kw: hashed.append(a) or "")
    assert integrity.quick_problem(tmp_path, records) is None and hashed == []  # unchanged: no whole hash
    monkeypatch.undo()
    monkeypatch.setattr(integrity, "SMALL_FILE_BYTES", 1024)
    with open(path, "r+b") as handle:  # offset 5000: past the first 4 KiB sample, before the next
        handle.seek(5000)
        byte = handle.read(1)
        handle.seek(5000)
        handle.write(bytes([byte[0] ^ 1]))
    assert integrity.quick_problem(tmp_path, records) == "model.gguf does not match its checksum"
    with open(path, "r+b") as handle:  # put back: the same bytes, a new stamp
        handle.seek(5000)
        handle.write(byte)
    before = list(records["model.gguf"]["stamp"])
    assert integrity.quick_problem(tmp_path, records) is None
    assert records["model.gguf"]["stamp"] == integrity.stamp_of(path) != before  # taken, for the caller to keep
    os.utime(path, ns=(0, 0))
    assert integrity.quick_problem(tmp_path, records) is None
