"""Trained heads on disk: heads.safetensors beside heads.json, and the check that they
belong to the target they are loaded for.

A head reads the target's features and writes through its LM head: on any other model
its drafts are noise. The fingerprint is the target's sizes and a probe of its LM head
(a few weights), compared with a tolerance so that the same model loaded in bfloat16 or
int8 still matches, while a different model of the same sizes does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from spectui.core import json_text
from spectui.core.errors import ModelError
from spectui.core.files import SETTINGS_FILE_LIMIT, read_capped_text, write_user_file
from spectui.heads.lm import input_dtype

if TYPE_CHECKING:  # built where their kind is read
    from spectui.heads.eagle import EagleDrafter
    from spectui.heads.medusa import MedusaHeads

KINDS = ("medusa", "eagle")
CONFIG_FILE = "heads.json"
WEIGHTS_FILE = "heads.safetensors"
FORMAT_VERSION = 1
_PROBE_COLUMNS = 4  # hidden dimensions probed
_PROBE_ROWS = 8  # vocabulary rows probed, spread over the vocabulary
# Relative to the probe's largest weight: int8 per-channel rounding is ~1/127 of a row's
# range; unrelated models differ by the weights' own size.
_PROBE_TOLERANCE = 0.05


def fingerprint(model: Any, name: str) -> dict:
    """The target's identity as heads.json keeps it: its name, sizes and an LM-head probe.

    The probe is a few weights read by running the LM head on unit vectors: a quantized
    LM head keeps no float weight to read, and this also gives the logits' true width.
    """
    lm_head = model.get_output_embeddings()
    hidden_size = int(model.config.hidden_size)
    device = next(model.parameters()).device
    with torch.no_grad():
        unit = torch.eye(hidden_size, device=device)[:_PROBE_COLUMNS].to(input_dtype(lm_head))
        columns = lm_head(unit).float()  # [columns, V]: the first columns of W, transposed
    vocab_size = int(columns.shape[-1])
    rows = torch.linspace(0, vocab_size - 1, _PROBE_ROWS).long().to(device)
    probe = [round(float(x), 6) for x in columns[:, rows].flatten()]
    return {"model": name, "vocab_size": vocab_size, "hidden_size": hidden_size, "lm_head_probe": probe}


def check_fingerprint(folder: Path, trained_for: dict, target: dict) -> None:
    """One line when the heads belong to another target; nothing when they match."""
    what = f"{folder} holds heads trained for {trained_for.get('model')!r}"
    sizes = ("vocab_size", "hidden_size")
    if any(trained_for.get(key) != target[key] for key in sizes):
        theirs = ", ".join(f"{key.split('_')[0]} {trained_for.get(key)}" for key in sizes)
        ours = ", ".join(f"{key.split('_')[0]} {target[key]}" for key in sizes)
        raise ModelError(
            f"{what} ({theirs}), not for {target['model']!r} ({ours}): "
            f"train heads for it with spectui heads train --model {target['model']}"
        )
    trained_probe = torch.tensor(trained_for.get("lm_head_probe") or [], dtype=torch.float32)
    target_probe = torch.tensor(target["lm_head_probe"], dtype=torch.float32)
    scale = float(target_probe.abs().max()) or 1.0
    if trained_probe.shape != target_probe.shape or float((trained_probe - target_probe).abs().max()) > _PROBE_TOLERANCE * scale:
        raise ModelError(
            f"{what}, whose LM head differs from {target['model']!r}'s (same sizes, other weights): "
            f"train heads for it with spectui heads train --model {target['model']}"
        )


def build_heads(kind: str, sizes: dict) -> MedusaHeads | EagleDrafter:
    if kind == "medusa":
        from spectui.heads.medusa import MedusaHeads

        return MedusaHeads(**sizes)
    if kind == "eagle":
        from spectui.heads.eagle import EagleDrafter

        return EagleDrafter(**sizes)
    raise ModelError(f"unknown kind of heads {kind!r}: expected one of {', '.join(KINDS)}")


def save_heads(folder: Path, kind: str, heads: MedusaHeads | EagleDrafter, target: dict, training: dict,
               overwrite: bool = False) -> Path:
    """Both files through the one safe writer: regular files only, heads already there
    replaced only with `overwrite` (`heads train --force`, or the cache's own folder)."""
    from safetensors.torch import save

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {name: tensor.detach().float().cpu().contiguous() for name, tensor in heads.state_dict().items()}
    write_user_file(folder / WEIGHTS_FILE, save(tensors), overwrite=overwrite)
    config = {"format": FORMAT_VERSION, "kind": kind, "sizes": heads.sizes(), "target": target, "training": training}
    write_user_file(folder / CONFIG_FILE, json.dumps(config, indent=2) + "\n", overwrite=overwrite)
    return folder


SIZE_KEYS = {
    "medusa": {"hidden_size", "num_heads", "num_layers"},
    "eagle": {"hidden_size", "num_heads", "intermediate_size", "window"},
}
RETRAIN = "train them again with spectui heads train"


def read_config(folder: Path | str) -> dict:
    """heads.json, checked key by key: a damaged or hand-edited file is one ModelError naming
    the file and the key, never a traceback from inside the loader."""
    folder = Path(folder)
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise ModelError(f"{folder} holds no trained heads ({CONFIG_FILE} is missing): make them with spectui heads train")
    try:
        config = json_text.loads(read_capped_text(path, SETTINGS_FILE_LIMIT))
    except UnicodeDecodeError as error:
        raise ModelError(f"{path}: not UTF-8 text (byte {error.start}): {RETRAIN}") from None
    except json.JSONDecodeError as error:
        raise ModelError(f"{path}: not JSON (line {error.lineno}, column {error.colno}: {error.msg}): {RETRAIN}") from None
    except OSError as error:
        raise ModelError(f"cannot read {path}: {error.strerror or error}") from None
    if not isinstance(config, dict) or config.get("kind") not in KINDS:
        raise ModelError(f"{path}: kind must be one of {', '.join(KINDS)}: {RETRAIN}")
    sizes = config.get("sizes")
    expected = SIZE_KEYS[config["kind"]]
    if not isinstance(sizes, dict) or set(sizes) != expected:
        raise ModelError(f"{path}: sizes must hold {', '.join(sorted(expected))}: {RETRAIN}")
    for key, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 1 << 20:
            raise ModelError(f"{path}: sizes.{key} must be a positive integer, got {value!r}: {RETRAIN}")
    target = config.get("target")
    if not isinstance(target, dict) or not _numbers(target.get("lm_head_probe")):
        raise ModelError(f"{path}: target must name the model with its lm_head_probe numbers: {RETRAIN}")
    return config


def _numbers(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)


def load_heads(folder: Path, model: Any, name: str, kind: str | None = None) -> tuple[torch.nn.Module, dict]:
    """(heads on the target's device in float32, their config); refused with a ModelError
    (one line) when they were trained for another target or are not of `kind`."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config = read_config(folder)
    if kind is not None and config["kind"] != kind:
        raise ModelError(f"{folder} holds {config['kind']} heads, not {kind}: pass --method {config['kind']}")
    check_fingerprint(folder, config["target"], fingerprint(model, name))
    try:
        heads = build_heads(config["kind"], config["sizes"])
    except ValueError as error:  # sizes that do not fit together (eagle: heads and width)
        raise ModelError(f"{folder / CONFIG_FILE}: sizes do not fit together ({error}): {RETRAIN}") from None
    try:
        heads.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    except Exception as error:  # a truncated or foreign file: say which, in one line
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(f"cannot load {folder / WEIGHTS_FILE}: {first[:160]}") from None
    heads.to(next(model.parameters()).device).eval().requires_grad_(False)
    return heads, config
