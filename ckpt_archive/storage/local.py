"""Local disk. Put-if-absent: write a temp file in the *same directory*, fsync it, then
``os.link`` it to the final name, which fails if that exists; readers never see a half-written
file. (``open("xb")`` would let them; ``LocalFileSystem.mv`` silently overwrites.) A plain put
renames the temp file over the old one, so readers see the old or the new bytes.

Reads take regular files only (a symlink is followed, to a regular file): a FIFO would block a reader's
``open`` until some writer came, a device (``/dev/zero``) reads without end, and a device's size says
nothing (0). The file is checked by ``stat`` before it is opened (a device is never opened), opened with
``O_NONBLOCK`` (a FIFO swapped in meanwhile cannot block) and checked again by ``fstat`` on the open
descriptor; a file too big for its kind is refused unread by that size, and the read itself stops one
byte past the bound (``limits.read_end``), whatever the file grew to since. So a read never blocks,
and the reads and listings of one loop turn can share one executor job (``sync_fs.Batched``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Sequence
from typing import Any, Unpack

import fsspec

from .. import limits
from ..errors import NotARegularFile
from .base import Listing, ObjectStore, StoreOptions
from .listing import listing
from .sync_fs import Batched, SyncFs


class LocalStore(ObjectStore):
    """Files under a local directory: reads, writes and the recursive listing its own, the listing of one
    folder and deletes ``SyncFs``'s."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, **options: Unpack[StoreOptions]) -> None:
        super().__init__(root, fs=fs, **options)
        self._files = SyncFs(fs, read=Batched())  # the reads of one loop turn: one executor job

    async def _get(self, key: str, kind: str | None) -> bytes:
        return await self._files.read(_read_local, self.path(key), kind, key)

    async def _list_dir(self, prefix: str) -> list[str]:
        return await self._files.names(self.path(prefix))

    async def _find(self, prefix: str) -> Listing:
        """One ``os.scandir`` walk (``find_local``), not fsspec's ``find``, which stats every folder
        again (``info``) after listing it: the same entries, a third of the CPU on a tree of many folders."""
        top = self._files.fs._strip_protocol(self.path(prefix))
        return listing(self.root, await self._files.run(find_local, top))

    @property
    def batched_puts(self) -> bool:
        return True

    async def _put(self, key: str, data: bytes) -> None:
        await self._files.run(_write_local, self.path(key), data, False)

    async def _put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Every file in one executor job, one after another (each its temp file, fsync and rename): a
        snapshot's objects are one thread-pool hop, not one each that the event loop waits on in turn."""
        await self._files.run(_write_many_local, [(self.path(key), data) for key, data in items])

    async def _create(self, key: str, data: bytes) -> bool:
        try:
            await self._files.run(_write_local, self.path(key), data, True)
        except FileExistsError:
            return False
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self._files.run(_copy_local, self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        await self._files.rm([self.path(k) for k in keys])

    async def _delete_prefix(self, prefix: str) -> None:
        await self._files.rm_tree(self.path(prefix))


def _read_local(path: str, kind: str | None = None, key: str | None = None) -> bytes:
    """The file's bytes, at most one past the bound of ``kind``; anything but a regular file, and a file
    too big for an archive object of ``kind``, is refused unread (see the module doc)."""
    where = key if key is not None else path
    check_regular(os.stat(path).st_mode, where)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a FIFO on some systems): nothing to read
            check_regular(stat.S_IFSOCK, where)
        raise
    try:
        size = os.fstat(fd)
        check_regular(size.st_mode, where)
        if kind is not None:
            limits.check_stored(kind, size.st_size, key=key)
        return limits.check_cut(kind, _read_to(fd, size.st_size, limits.read_end(kind)), key=key)
    finally:
        os.close(fd)


def find_local(top: str) -> dict[str, dict[str, Any]]:
    """Every file under ``top`` (a path as fsspec strips it), path -> ``size`` and ``mtime``, sorted:
    the entries fsspec's ``LocalFileSystem.find(detail=True)`` gives, from one ``scandir`` per folder.

    As there: ``top`` itself when it is a file (a symlink followed, its target's size and mtime), nothing
    when it is absent or unreadable; under it, everything that is not a folder -- hidden files, the
    ``.tmp-`` files of writes in flight (gc tells them apart: ``layout``), FIFOs, and symlinks, which are
    listed, never walked (a link to a folder, or a loop, is one entry: the target's size, 0 when it
    is gone, and the link's own mtime); an entry gone between the listing and its ``stat`` is left out,
    and a folder whose listing fails otherwise is left out whole, its subfolders with it."""
    found: dict[str, dict[str, Any]] = {}
    try:
        st = os.stat(top)
    except OSError:
        return found
    if not stat.S_ISDIR(st.st_mode):
        return {top: {"size": st.st_size, "mtime": st.st_mtime}}
    todo = [top]
    while todo:
        folder = todo.pop()
        files: dict[str, dict[str, Any]] = {}
        subfolders: list[str] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        own = entry.stat(follow_symlinks=False)
                        if entry.is_dir(follow_symlinks=False):
                            subfolders.append(entry.path)
                            continue
                        size = own.st_size
                        if entry.is_symlink():
                            try:
                                size = entry.stat(follow_symlinks=True).st_size
                            except OSError:
                                size = 0
                        files[entry.path] = {"size": size, "mtime": own.st_mtime}
                    except FileNotFoundError:
                        continue
        except OSError:
            continue
        found.update(files)
        todo.extend(subfolders)
    return dict(sorted(found.items()))


def _read_to(fd: int, size: int, end: int | None) -> bytes:
    """The bytes of ``fd`` up to EOF or ``end``, in one read of the ``size`` fstat gave (and one more
    that finds EOF): a read of ``end`` bytes would allocate all of them whatever the file holds, and a
    file that grew since is read on in small chunks, never past ``end``."""
    chunks, got, want = [], 0, size + 1
    while end is None or got < end:
        chunk = os.read(fd, want if end is None else min(want, end - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
        want = 1 << 16
    return b"".join(chunks)  # one chunk (the usual case): that very object, no copy


_SPECIAL = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def check_regular(mode: int, where: str) -> None:
    """Refuse what is not a regular file (``mode`` as ``stat`` gives it, the symlink followed)."""
    if not stat.S_ISREG(mode):
        what = _SPECIAL.get(stat.S_IFMT(mode), "not a file")
        raise NotARegularFile(
            f"archive object is {what}, not a regular file (a symlink to one is refused too): remove it, "
            "then restore the object from a copy (verify lists what is lost)",
            key=where,
        )


def _copy_local(src: str, dst: str) -> None:
    _write_local(dst, _read_local(src), False)


def _write_many_local(items: list[tuple[str, bytes]]) -> None:
    for path, data in items:
        _write_local(path, data, False)


def _write_local(path: str, data: bytes, exclusive: bool) -> None:
    """Temp file in the same directory + fsync, then link (exclusive) or rename (replace). The folder
    is created only when the temp file cannot be (the first write into it): a plain save, one file in
    the thread's existing ``_log/``, makes no ``mkdir`` call (``tests/test_store_backends.py``)."""
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(tmp, flags, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
            tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
