"""Handing freed memory back to the system. Stdlib only."""

from __future__ import annotations


def return_freed_memory() -> None:
    """Hand freed heap pages back to the system: glibc keeps them in the arena that freed them
    otherwise (after packing the default pair: 0.24 GiB of RSS; after settling the 1.5B: 1.2 GiB)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
