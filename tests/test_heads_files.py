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
