"""Which draft tokens a target also has: the vocabulary intersection of two tokenizers, for
drafting across vocabularies (TLI, Timor et al. 2025; docs/cross-vocab.md).

Tokens are compared by the bytes they decode to, not by their spelling: byte-level BPE writes
a space as "Ġ" and every byte as a printable stand-in, sentencepiece writes a space as "▁" and
a raw byte as "<0xNN>". Added tokens (specials, control tokens) and a GGUF's "[PADn]" rows are
left out: the draft never proposes them. Built once per pair of tokenizer files and cached in
the cache dir under both files' hashes; plain functions and a frozen record, no engine code.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from spectui.core import json_text
from spectui.core.errors import ModelError
from spectui.core.files import MODEL_JSON_LIMIT, read_capped

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy

    from spectui.models.registry import ResolvedModel

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
MAP_FORMAT = 2  # in the cache file's name: a map written under another layout is rebuilt
_PAD = re.compile(r"\[PAD\d+\]")  # the rows a GGUF conversion adds to fill the embedding
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # sentencepiece's byte fallback
_NOT_A_BYTE = 0xFFFD  # what a character outside the byte alphabet translates to: latin-1 refuses it


@dataclass(frozen=True)
class TokenTable:
    """One tokenizer's tokens as bytes, by id: `pieces[i]` what id i decodes to (an added
    token's text as it is); `shareable[i]` False for added tokens, padding and empty ones."""

    pieces: list[bytes]
    shareable: list[bool]
    names: list[str]  # the tokens as the tokenizer spells them (a same-tokenizer check compares these)


@dataclass(frozen=True)
class VocabMap:
    """A draft/target pair's intersection. draft_to_target[d]: the target id with draft id d's
    bytes, -1 where the target has none (or d is not shareable)."""

    draft_to_target: numpy.ndarray  # int64 [draft tokens]
    target_offsets: numpy.ndarray  # int64 [target tokens + 1]: target id t's bytes are blob[o[t]:o[t+1]]
    target_blob: bytes
    draft_byte_ids: numpy.ndarray  # int64 [256]: the draft's one-byte token for each byte, -1 if none
    draft_shareable: int
    target_shareable: int
    # Same tokenizer (the ids mean the same tokens, one side maybe padded): ids below same_width
    # are real tokens in both; 0 when the tokenizers differ.
    same_width: int
    # The draft's shareable tokens' bytes by id (SLEM reads the draft's own text): draft id d's
    # are draft_blob[o[d]:o[d+1]], empty for an added token, padding or an empty one.
    draft_offsets: numpy.ndarray | None = None
    draft_blob: bytes = b""

    @property
    def shared(self) -> int:
        return int((self.draft_to_target >= 0).sum())

    @property
    def identical(self) -> bool:
        return self.same_width > 0

    @property
    def draft_overlap(self) -> float:
        """The share of the draft's own tokens the target also has (what the panel shows)."""
        return self.shared / self.draft_shareable if self.draft_shareable else 0.0

    def target_piece(self, token: int) -> bytes:
        if not 0 <= token < len(self.target_offsets) - 1:
            return b""
        return self.target_blob[int(self.target_offsets[token]):int(self.target_offsets[token + 1])]

    def draft_piece(self, token: int) -> bytes:
        """What draft id `token` decodes to; b"" for a special, padding or an id past the table."""
        offsets = self.draft_offsets
        if offsets is None or not 0 <= token < len(offsets) - 1:
            return b""
        return self.draft_blob[int(offsets[token]):int(offsets[token + 1])]

    def target_to_draft(self) -> dict[int, int]:
        drafts = (self.draft_to_target >= 0).nonzero()[0]
        return dict(zip(self.draft_to_target[drafts].tolist(), drafts.tolist()))

    def panel_words(self) -> str:
        """What the stats panel says of the pair ("80% shared"); "" for one tokenizer."""
        return "" if self.identical else f"{self.draft_overlap:.0%} shared"

    def describe(self) -> str:
        """The pair in a few words, for `spectui models --for` and the panel."""
        if self.identical:
            return "same vocabulary"
        return f"TLI: draft vocabulary {self.draft_overlap:.0%} shared ({self.shared:,} tokens)"


@lru_cache(maxsize=1)
def _byte_translation() -> dict[int, int]:
    """GPT-2's bytes_to_unicode, reversed, as a str.translate table: each byte's printable
    stand-in -> the latin-1 character of that byte. A character below 256 that is not a
    stand-in (a plain space) -> one latin-1 cannot encode, so it fails like any outside one."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {code: code for code in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[256 + extra] = byte
            table[byte] = _NOT_A_BYTE
            extra += 1
    return table


def scheme_of(tokens: Iterable[str]) -> str:
    """"bytes" (byte-level BPE: "Ġ" for a space), "metaspace" (sentencepiece: "▁"), or "text"."""
    sample = list(itertools.islice(tokens, 20000))
    byte_level = sum(1 for token in sample if token.startswith(("Ġ", "Ċ")))
    metaspace = sum(1 for token in sample if token.startswith("▁"))
    if byte_level == metaspace == 0:
        return "text"
    return "bytes" if byte_level > metaspace else "metaspace"


def piece_bytes(token: str, scheme: str) -> bytes | None:
    """What one vocabulary token decodes to; None when it is not written in the scheme (a
    byte-level token with a character outside the byte alphabet)."""
    if scheme == "bytes":
        try:
            return token.translate(_byte_translation()).encode("latin-1")
        except UnicodeEncodeError:
            return None
    if scheme == "metaspace":
        byte = _BYTE.fullmatch(token)
        return bytes([int(byte.group(1), 16)]) if byte else token.replace("▁", " ").encode("utf-8")
    return token.encode("utf-8")


def token_table(vocab: dict[str, int], added: set[int]) -> TokenTable:
    """Every id's bytes; added tokens keep their text but are not shareable."""
    size = max(vocab.values(), default=-1) + 1
    scheme = scheme_of(token for token, index in vocab.items() if index not in added)
    pieces, shareable, names = [b""] * size, [False] * size, [""] * size
    for token, index in vocab.items():
        names[index] = token
        if index in added:
            pieces[index] = token.encode("utf-8")
            continue
        piece = piece_bytes(token, scheme)
        if piece is None:
            pieces[index] = token.encode("utf-8")
            continue
        pieces[index] = piece
        shareable[index] = bool(piece) and not _is_pad(token)
    return TokenTable(pieces, shareable, names)


def intersect(target: TokenTable, draft: TokenTable) -> VocabMap:
    """The pair's map: each shareable draft token to the target's token with its bytes. One
    draft id per target id (the lowest), so a proposal's probabilities carry over one to one."""
    import numpy

    by_bytes: dict[bytes, int] = {}
    for index, (piece, ok) in enumerate(zip(target.pieces, target.shareable)):
        if ok:
            by_bytes.setdefault(piece, index)
    draft_to_target = numpy.full(len(draft.pieces), -1, dtype=numpy.int64)
    taken: set[int] = set()
    byte_ids = numpy.full(256, -1, dtype=numpy.int64)
    for index, (piece, ok) in enumerate(zip(draft.pieces, draft.shareable)):
        if not ok:
            continue
        if len(piece) == 1 and byte_ids[piece[0]] < 0:
            byte_ids[piece[0]] = index
        match = by_bytes.get(piece)
        if match is not None and match not in taken:
            taken.add(match)
            draft_to_target[index] = match
    offsets, blob = _packed(target.pieces)
    draft_offsets, draft_blob = _packed([piece if ok else b"" for piece, ok in zip(draft.pieces, draft.shareable)])
    return VocabMap(draft_to_target, offsets, blob, byte_ids, sum(draft.shareable), sum(target.shareable),
                    same_width(target, draft), draft_offsets, draft_blob)


def _packed(pieces: list[bytes]) -> tuple[numpy.ndarray, bytes]:
    """Pieces as one blob and the offsets of each (piece i is blob[o[i]:o[i+1]])."""
    import numpy

    offsets = numpy.zeros(len(pieces) + 1, dtype=numpy.int64)
    offsets[1:] = numpy.cumsum([len(piece) for piece in pieces])
    return offsets, b"".join(pieces)


def same_width(target: TokenTable, draft: TokenTable) -> int:
    """How many leading ids are real tokens spelled alike in both, when the two are one tokenizer
    (one side padded: Qwen's 151,936 rows against 152,064 is the same tokenizer); 0 when not."""
    common = min(len(target.names), len(draft.names))
    width = min(_first_pad(target.names, common), _first_pad(draft.names, common))
    if any(target.names[index] != draft.names[index] for index in range(common)
           if index < width or not (_is_pad(target.names[index]) or _is_pad(draft.names[index]))):
        return 0
    return width


def _first_pad(names: list[str], limit: int) -> int:
    return next((index for index in range(limit) if _is_pad(names[index])), limit)


def _is_pad(token: str) -> bool:
    return token.startswith("[PAD") and _PAD.fullmatch(token) is not None


def folder_table(folder: Path) -> TokenTable:
    """The table of the tokenizer files in `folder` (tokenizer.json; else transformers reads it)."""
    path = folder / TOKENIZER_FILE
    if path.is_file():
        try:
            data = json_text.loads(read_capped(path, MODEL_JSON_LIMIT), max_depth=None)  # 7 MB of merges: no pre-pass
        except (OSError, ValueError) as error:
            raise ModelError(f"cannot read {path}: {str(error).splitlines()[0][:200]}") from None
        vocab = (data.get("model") or {}).get("vocab")
        if isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
            vocab = {entry[0]: index for index, entry in enumerate(vocab)}
        if not isinstance(vocab, dict):
            raise ModelError(f"{path} has no vocabulary this map understands")
        vocab = dict(vocab)
        added = set()
        for token in data.get("added_tokens") or []:
            vocab[token["content"]] = token["id"]
            added.add(token["id"])
        return token_table(vocab, added)
    from spectui.models.load import _auto_tokenizer

    tokenizer = _auto_tokenizer(folder)
    return token_table(dict(tokenizer.get_vocab()), set(tokenizer.added_tokens_decoder))


def tokenizer_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in (TOKENIZER_FILE, CONFIG_FILE):
        with contextlib.suppress(OSError):
            digest.update(read_capped(folder / name, MODEL_JSON_LIMIT))
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def vocab_map(target_folder: Path, draft_folder: Path, cache: Path | None = None) -> VocabMap:
    """The pair's map, read from the cache when it was built before (keyed by both tokenizers'
    hashes), else built and cached. cache: a folder (default: the cache dir's vocab-maps)."""
    from spectui.models.registry import cache_dir

    folder = cache if cache is not None else cache_dir() / "vocab-maps"
    path = folder / f"{tokenizer_hash(target_folder)}-{tokenizer_hash(draft_folder)}-v{MAP_FORMAT}.npz"
    cached = _read_map(path)
    if cached is not None:
        return cached
    built = intersect(folder_table(target_folder), folder_table(draft_folder))
    _write_map(path, built)
    return built


def draft_vocab(target: str, target_folder: Path, draft: str, draft_folder: Path) -> VocabMap:
    """The map a draft drafts with (tokenizer files only: before any weights load); a draft
    that shares no token with the target is refused in one line."""
    built = vocab_map(target_folder, draft_folder)
    if not built.identical and built.shared == 0:
        raise ModelError(f"draft {draft} shares no token with {target}'s vocabulary: it cannot draft for it")
    return built


def cached_tokenizer_folder(model: ResolvedModel) -> Path | None:
    """The model's tokenizer files where they already are on disk (nothing fetched); None if not yet."""
    from spectui.models.registry import cache_dir, converted_dir

    candidates: list[Path] = []
    if model.kind == "folder" and model.path is not None:
        candidates.append(model.path)
    elif model.spec is not None:
        candidates.append(converted_dir(model.spec.alias))
    if model.kind == "gguf" and model.path is not None:
        candidates += sorted((cache_dir() / "tokenizers").glob(f"{model.path.stem}-*"))
    return next((folder for folder in candidates if (folder / TOKENIZER_FILE).is_file()), None)


def _read_map(path: Path) -> VocabMap | None:
    import numpy

    try:
        with numpy.load(path) as stored:
            return VocabMap(stored["draft_to_target"], stored["target_offsets"], stored["target_blob"].tobytes(),
                            stored["draft_byte_ids"], int(stored["counts"][0]), int(stored["counts"][1]),
                            int(stored["counts"][2]), stored["draft_offsets"], stored["draft_blob"].tobytes())
    except (OSError, ValueError, KeyError):
        return None  # absent or damaged: built again


def _write_map(path: Path, built: VocabMap) -> None:
    import numpy

    with contextlib.suppress(OSError):  # a read-only cache: built again next time
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial.npz")
        numpy.savez(partial, draft_to_target=built.draft_to_target, target_offsets=built.target_offsets,
                    target_blob=numpy.frombuffer(built.target_blob, dtype=numpy.uint8),
                    draft_byte_ids=built.draft_byte_ids,
                    draft_offsets=built.draft_offsets if built.draft_offsets is not None else numpy.zeros(1, dtype=numpy.int64),
                    draft_blob=numpy.frombuffer(built.draft_blob, dtype=numpy.uint8),
                    counts=numpy.array([built.draft_shareable, built.target_shareable, built.same_width]))
        partial.replace(path)
