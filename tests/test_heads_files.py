"""heads.json that is not what spectui wrote: one ModelError naming the file and the key,
never a traceback from the JSON reader or the heads' constructors."""

from __future__ import annotations

import json

import pytest

from spectui.core.errors import ModelError
from spectui.heads.medusa import MedusaHeads
from spectui.heads.store import CONFIG_FILE, fingerprint, load_heads, read_config, save_heads


@pytest.fixture
def saved(tmp_path, tiny_target):
    heads = MedusaHeads(hidden_size=int(tiny_target.config.hidden_size), num_heads=2)
    save_heads(tmp_path, "medusa", heads, fingerprint(tiny_target, "tiny"), {"steps": 1})
    return tmp_path


def rewrite(folder, change) -> None:
    path = folder / CONFIG_FILE
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def test_the_saved_file_reads_back(saved, tiny_target):
    heads, config = load_heads(saved, tiny_target, "tiny", kind="medusa")
    assert config["kind"] == "medusa" and heads.num_heads == 2


def test_binary_and_broken_json_name_the_file_and_where(saved):
    path = saved / CONFIG_FILE
    path.write_bytes(b'{"kind": "medusa", \xff\xfe}')
    with pytest.raises(ModelError, match=rf"^{path}: not UTF-8 text \(byte 19\): train them again"):
        read_config(saved)
    path.write_text('{\n  "kind": "medusa",\n  "sizes": {,\n}')
    with pytest.raises(ModelError, match=rf"^{path}: not JSON \(line 3, column 13: "):
        read_config(saved)


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda c: c["sizes"].update(hidden_size="64"), "sizes.hidden_size must be a positive integer"),
        (lambda c: c["sizes"].update(num_heads=-1), "sizes.num_heads must be a positive integer"),
        (lambda c: c["sizes"].update(extra=1), "sizes must hold hidden_size, num_heads, num_layers"),
        (lambda c: c.update(sizes=[1, 2]), "sizes must hold"),
        (lambda c: c.update(target="tiny"), "target must name the model"),
        (lambda c: c["target"].update(lm_head_probe=["x"]), "target must name the model"),
        (lambda c: c.update(kind="lora"), "kind must be one of medusa, eagle"),
    ],
)
def test_a_wrong_key_is_named_before_anything_loads(saved, tiny_target, change, says):
    rewrite(saved, change)
    with pytest.raises(ModelError) as caught:
        load_heads(saved, tiny_target, "tiny")
    message = str(caught.value)
    assert message.startswith(str(saved / CONFIG_FILE)) and says in message and "\n" not in message


# ---------------------------------------------------------------- heads train --out: the one safe writer


def train_into(out, *more: str):
    from typer.testing import CliRunner

    from spectui.cli.app import app

    return CliRunner().invoke(app, ["heads", "train", "--kind", "medusa", "--model", "smollm2-135m", "--out", str(out), *more])


@pytest.fixture
def nothing_trains(monkeypatch):
    monkeypatch.setattr("spectui.cli.heads.run_train", lambda *a, **k: pytest.fail("the training ran"))


def test_heads_train_refuses_an_out_that_holds_heads_unless_forced_before_training(tmp_path, nothing_trains):
    out = tmp_path / "heads"
    out.mkdir()
    (out / "heads.safetensors").write_bytes(b"earlier heads")
    result = train_into(out)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"spectui: error: --out {out} holds heads already: name a new folder, "
                                     "or add --force to replace them")
    assert (out / "heads.safetensors").read_bytes() == b"earlier heads"


def test_heads_train_refuses_a_fifo_in_out_even_forced(tmp_path, nothing_trains):
    import os

    out = tmp_path / "heads"
    out.mkdir()
    os.mkfifo(out / "heads.json")
    result = train_into(out, "--force")
    assert result.exit_code == 2, result.output
    assert "cannot write heads.json there (a FIFO, not a regular file)" in result.stderr


def test_saved_heads_replace_heads_only_when_told(tmp_path, tiny_target):
    heads = MedusaHeads(hidden_size=int(tiny_target.config.hidden_size), num_heads=2)
    save_heads(tmp_path, "medusa", heads, fingerprint(tiny_target, "tiny"), {"steps": 1})
    with pytest.raises(FileExistsError):
        save_heads(tmp_path, "medusa", heads, fingerprint(tiny_target, "tiny"), {"steps": 2})
    save_heads(tmp_path, "medusa", heads, fingerprint(tiny_target, "tiny"), {"steps": 3}, overwrite=True)
    assert read_config(tmp_path)["training"]["steps"] == 3
