"""libllama from `llama-cpp-py-sync` on a glibc older than the one it was built against.

The wheel's shared libraries (tagged manylinux2014) import four C23 aliases from glibc 2.38:
`__isoc23_strtol`, `__isoc23_strtoul`, `__isoc23_strtoull` and `__isoc23_sscanf`, which
differ from the classic functions only in also reading `0b` binary literals. On an older
glibc (Debian 12 has 2.36) the loader refuses the whole library. A copy of the libraries
whose imports name the classic functions, versioned GLIBC_2.2.5, loads and behaves the
same for every number llama.cpp reads (its parsers never see a `0b` literal). The copy is
made once per wheel version in the user's cache; the installed files are never touched.
Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import platform
import struct
from pathlib import Path

C23_PREFIX = b"__isoc23_"
NEW_VERSION = b"GLIBC_2.38"
OLD_VERSION = b"GLIBC_2.2.5"

SHT_DYNSYM = 11
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF
# The only glibc 2.38 functions the copy stands in for: any other is refused, never guessed at.
KNOWN_C23 = frozenset({b"__isoc23_strtol", b"__isoc23_strtoul", b"__isoc23_strtoull", b"__isoc23_sscanf"})


class ElfPatchError(ValueError):
    """The file is not a 64-bit little-endian ELF shared library this module understands."""


def elf_hash(name: bytes) -> int:
    """The SysV ELF hash, which a version entry carries beside its name."""
    value = 0
    for byte in name:
        value = ((value << 4) + byte) & 0xFFFFFFFF
        high = value & 0xF0000000
        if high:
            value ^= high >> 24
        value &= ~high & 0xFFFFFFFF
    return value


def _sections(data: bytes) -> list[tuple[int, int, int, int, int]]:
    """(type, offset, size, link, entry size) of every section header."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfPatchError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for index in range(shnum):
        _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + index * shentsize)
        sections.append((kind, offset, size, link, entsize))
    return sections


def _string(data: bytes | bytearray, offset: int) -> bytes:
    return bytes(data[offset:data.index(b"\0", offset)])


def _version_needs(data: bytes, sections: list[tuple[int, ...]]) -> list[tuple[int, int, bytes, int]]:
    """(entry offset, name offset, name, version index) of every version a library needs, file
    by file in order (a file's versions are consecutive)."""
    verneed = [s for s in sections if s[0] == SHT_GNU_VERNEED]
    if not verneed:
        return []
    _, entry, _, strtab_index, _ = verneed[0]
    strtab = sections[strtab_index][1]
    needs = []
    while True:
        _version, count, _file, aux, next_entry = struct.unpack_from("<HHIII", data, entry)
        position = entry + aux
        for _ in range(count):
            _hash, _flags, other, name, next_aux = struct.unpack_from("<IHHII", data, position)
            needs.append((position, name, _string(data, strtab + name), other))
            position += next_aux
        if not next_entry:
            return needs
        entry += next_entry


def version_names(data: bytes) -> list[bytes]:
    return [name for _, _, name, _ in _version_needs(data, _sections(data))]


def needs_c23_glibc(data: bytes) -> bool:
    return data[:4] == b"\x7fELF" and NEW_VERSION in version_names(data)


def patch_c23_imports(data: bytes) -> bytes:
    """The library with its C23 imports renamed to the classic functions and their
    GLIBC_2.38 version requirement pointed at GLIBC_2.2.5 (which every x86-64 glibc has)."""
    out = bytearray(data)
    sections = _sections(data)
    needs = _version_needs(data, sections)
    dynsym = [s for s in sections if s[0] == SHT_DYNSYM]
    old = [name_offset for _, name_offset, name, _ in needs if name == OLD_VERSION]
    if not dynsym or not old:
        raise ElfPatchError("no dynamic symbols or no GLIBC_2.2.5 requirement")
    unknown = sorted(set(c23_imports(data, sections, needs)) - KNOWN_C23)
    if unknown:
        raise ElfPatchError(f"it needs {', '.join(n.decode() for n in unknown)} from glibc 2.38, "
                            "which this glibc lacks and spectui does not stand in for")
    for position, _, name, _ in needs:
        if name == NEW_VERSION:
            struct.pack_into("<I", out, position, elf_hash(OLD_VERSION))
            struct.pack_into("<I", out, position + 8, old[0])
    _, sym_offset, sym_size, sym_strtab_index, sym_entsize = dynsym[0]
    sym_strtab = sections[sym_strtab_index][1]
    for index in range(sym_size // sym_entsize):
        name_offset = struct.unpack_from("<I", data, sym_offset + index * sym_entsize)[0]
        name = _string(data, sym_strtab + name_offset)
        if name.startswith(C23_PREFIX):
            # Written over the start of the old name: a shorter name and its NUL fit, and a
            # name that shares the old one's tail (the string table reuses suffixes) keeps it.
            classic = name[len(C23_PREFIX):] + b"\0"
            start = sym_strtab + name_offset
            out[start:start + len(classic)] = classic
    return bytes(out)


def c23_imports(data: bytes, sections: list[tuple[int, ...]] | None = None,
                needs: list[tuple[int, int, bytes, int]] | None = None) -> list[bytes]:
    """The names of the dynamic symbols bound to GLIBC_2.38 (through the symbol version table)."""
    sections = sections if sections is not None else _sections(data)
    needs = needs if needs is not None else _version_needs(data, sections)
    new_indexes = {index for _, _, name, index in needs if name == NEW_VERSION}
    dynsym = [s for s in sections if s[0] == SHT_DYNSYM]
    versym = [s for s in sections if s[0] == SHT_GNU_VERSYM]
    if not dynsym or not versym or not new_indexes:
        return []
    _, sym_offset, sym_size, sym_strtab_index, sym_entsize = dynsym[0]
    sym_strtab = sections[sym_strtab_index][1]
    names = []
    for index in range(sym_size // sym_entsize):
        version = struct.unpack_from("<H", data, versym[0][1] + 2 * index)[0] & 0x7FFF
        if version in new_indexes:
            name_offset = struct.unpack_from("<I", data, sym_offset + index * sym_entsize)[0]
            names.append(_string(data, sym_strtab + name_offset))
    return names


def glibc_has_c23() -> bool:
    version = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if not version or not version.startswith("glibc "):
        return True  # not glibc: nothing this module knows how to help with
    major, minor = (int(part) for part in version.split()[1].split(".")[:2])
    return (major, minor) >= (2, 38)


def loadable_library_dir(package_dir: Path, cache_dir: Path) -> Path:
    """The folder to load libllama from: the package's own, or on an older glibc a patched
    copy of its libraries under cache_dir: made once, checked against its record at each start
    (rebuilt when it does not match) and loaded once in a child before this process maps it."""
    from spectui.engines.ggml.library_copy import LibraryCopyError, copy_problem, probe_problem

    libraries = sorted(path for path in package_dir.iterdir() if ".so" in path.name and path.is_file())
    sources = {path.name: path.read_bytes() for path in libraries}
    if glibc_has_c23() or not any(needs_c23_glibc(data) for data in sources.values()):
        return package_dir
    if platform.machine().lower() not in ("x86_64", "amd64"):
        raise ElfPatchError(f"its libraries need glibc 2.38 and spectui stands in for it on x86-64 only "
                            f"(this machine is {platform.machine()})")
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    with _locked(cache_dir.with_name(cache_dir.name + ".lock")):  # two chats starting at once: one copy
        if copy_problem(cache_dir, sources) is not None:
            _make_copy(cache_dir, sources)
        problem = probe_problem(cache_dir)
    if problem is not None:
        raise LibraryCopyError(f"{problem}: run with --backend torch, or delete {cache_dir} to have it made again")
    return cache_dir


def _make_copy(cache_dir: Path, sources: dict[str, bytes]) -> None:
    from spectui.engines.ggml.library_copy import LibraryCopyError, copy_problem, write_copy

    def patched(data: bytes) -> bytes:
        return patch_c23_imports(data) if needs_c23_glibc(data) else data

    try:
        write_copy(cache_dir, sources, patched)
    except OSError as error:
        raise LibraryCopyError(f"cannot write the llama.cpp library copy in {cache_dir} "
                               f"({error.strerror or error}): free space there, or run with --backend torch") from None
    problem = copy_problem(cache_dir, sources)
    if problem is not None:  # written but not read back as written: the disk, not the copy
        raise LibraryCopyError(f"the llama.cpp library copy in {cache_dir} does not read back as written "
                               f"({problem}): check that disk, or run with --backend torch")


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive advisory lock on `path` (two chats starting at once make one copy)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
