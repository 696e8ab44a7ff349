"""Read-only memory maps whose resident pages a long streaming read can drop.

A memory-mapped file's pages count in the process's RSS once touched, until it is
unmapped: one pass over a 6 GB Arrow corpus or 4 GB of embedding shards would leave all
of it resident (reclaimable page cache, but counted against a job's memory limit and shown by
``top``). Neither ``pyarrow.memory_map`` nor ``numpy.memmap`` can ``madvise``; a Python
:class:`mmap.mmap` can, and Arrow and numpy read it zero-copy. :meth:`MappedFile.read`
counts the bytes a reader used and drops the resident pages (``MADV_DONTNEED``: a later
read faults them back in from the page cache, unchanged) every ``release_every`` bytes,
or once a whole pass was read (a small file is dropped after one pass). Linux drops the
pages at once; macOS takes the advice for file pages loosely (RSS may not fall); Windows
has no ``madvise`` (a no-op).
"""

from __future__ import annotations

import mmap
import os

import numpy as np

RELEASE_BYTES = 256 * 2**20
"""Default bytes read between two releases of a mapping's resident pages."""


class MappedFile:
    """A read-only memory map of ``path`` that drops its pages every ``release_every``
    bytes read (:meth:`read`), or when told (:meth:`release`)."""

    def __init__(self, path: str | os.PathLike, release_every: int = RELEASE_BYTES) -> None:
        with open(path, "rb") as handle:
            self.map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        self.release_every = release_every
        self.data_bytes = len(self.map)
        """What a full pass of its reader counts (a reader may set it: the .npy data)."""
        self.unreleased = 0
        self.releases = 0

    def buffer(self):
        """The whole file as a zero-copy ``pyarrow.Buffer``."""
        import pyarrow as pa

        return pa.py_buffer(self.map)

    def read(self, nbytes: int) -> None:
        """Count ``nbytes`` read; past ``release_every`` (or ``data_bytes``, a whole pass),
        :meth:`release`."""
        self.unreleased += nbytes
        if self.unreleased >= min(self.release_every, self.data_bytes):
            self.release()

    def release(self) -> None:
        """Drop the resident pages from this process; a no-op where the OS has no
        ``MADV_DONTNEED``."""
        self.unreleased = 0
        if hasattr(mmap, "MADV_DONTNEED") and hasattr(self.map, "madvise"):
            self.map.madvise(mmap.MADV_DONTNEED)
            self.releases += 1


def map_npy(path: str | os.PathLike, release_every: int = RELEASE_BYTES
            ) -> tuple[MappedFile, np.ndarray]:
    """The array of the ``.npy`` file ``path``, read-only and zero-copy from a
    :class:`MappedFile` (what ``np.load(mmap_mode="r")`` gives, plus page release)."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"{path}: .npy format {version} is not read here")
        shape, fortran, dtype = readers[version](handle)
        offset = handle.tell()
    mapped = MappedFile(path, release_every)
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(mapped.map, dtype=dtype, count=count, offset=offset)
    mapped.data_bytes = max(array.nbytes, 1)
    return mapped, array.reshape(shape, order="F" if fortran else "C")


__all__ = ["RELEASE_BYTES", "MappedFile", "map_npy"]
